//go:build linux && amd64

package kernel

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/leakscope/leakscope/internal/testutil"
)

// verifierBudget is the most instructions the verifier may process for any
// one program: a quarter of its limit (1M), so that a change which makes a
// program much harder to verify shows here, on this kernel, long before a
// kernel whose verifier prunes less refuses it. The stack walk is inlined
// into every return program and is what grows: one more branch in
// stack_read once took alloc_session from 85k to over 1M.
const verifierBudget = 250000

var processedRE = regexp.MustCompile(`processed (\d+) insns`)

// TestProgramsVerifyWithinBudget loads every program of the object alone
// (with small hash maps: sizes do not change what is verified) and reads
// how many instructions the verifier processed.
func TestProgramsVerifyWithinBudget(t *testing.T) {
	testutil.RequireBPF(t)
	spec, err := loadLeak()
	if err != nil {
		t.Fatal(err)
	}
	maps := map[string]*ebpf.MapSpec{}
	for name, m := range spec.Maps {
		m = m.Copy()
		if m.Type == ebpf.Hash && m.MaxEntries > 1024 {
			m.MaxEntries = 1024
		}
		maps[name] = m
	}
	for name, p := range spec.Programs {
		t.Run(name, func(t *testing.T) {
			one := &ebpf.CollectionSpec{
				Maps:      maps,
				Programs:  map[string]*ebpf.ProgramSpec{name: p},
				Variables: spec.Variables,
				Types:     spec.Types,
			}
			coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{
				Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats},
			})
			var verr *ebpf.VerifierError
			if errors.As(err, &verr) && processedRE.MatchString(fmt.Sprint(verr.Log)) {
				t.Fatalf("verifier refused %s: %v", name, err)
			}
			if err != nil {
				// A program this kernel lacks the hook or helpers for
				// (the tracer does not load it here either).
				testutil.SkipOrFail(t, fmt.Sprintf("%s does not load on this kernel: %v", name, err))
			}
			defer coll.Close()
			m := processedRE.FindStringSubmatch(coll.Programs[name].VerifierLog)
			if m == nil {
				t.Fatalf("no instruction count in the verifier log of %s:\n%s", name, coll.Programs[name].VerifierLog)
			}
			n, _ := strconv.Atoi(m[1])
			t.Logf("%s: verifier processed %d instructions", name, n)
			if n > verifierBudget {
				t.Errorf("%s: verifier processed %d instructions, budget %d (limit 1M)", name, n, verifierBudget)
			}
		})
	}
}
