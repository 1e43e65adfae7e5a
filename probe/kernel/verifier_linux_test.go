//go:build linux

package kernel

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

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

// budgetConfigs are the loads the budget is checked under: what Load
// sets the object's constants to (setConstants) changes which paths the
// verifier walks (a constant branch is pruned), so each way the tracer
// loads is verified, not only the object's defaults.
var budgetConfigs = []struct {
	name string
	c    Config
}{
	{"attach", Config{MaxAllocations: 1 << 20, MaxSites: 1 << 16}},
	{"attach --follow", Config{Follow: true, MaxAllocations: 1 << 20, MaxSites: 1 << 16}},
	{"run", Config{Wait: true, Follow: true, MaxAllocations: 1 << 20, MaxSites: 1 << 16}},
	{"followed child", Config{Wait: true, Follow: true, ExecSeen: true, MaxAllocations: 1 << 20, MaxSites: 1 << 16}},
	{"sampled", Config{Wait: true, Follow: true, SampleBytes: 512 << 10, SampleExact: 40, MaxAllocations: 1 << 20, MaxSites: 1 << 16}},
	{"maps, sampled", Config{Maps: true, SampleBytes: 512 << 10, SampleExact: 40, MaxAllocations: 1 << 20, MaxSites: 1 << 16}},
	{"maps, no buckets", Config{Maps: true, MaxAllocations: 1, MaxSites: 1 << 16}},
	{"probes-only", Config{ProbesOnly: true, MaxAllocations: 1 << 20, MaxSites: 1 << 16}},
}

// TestProgramsVerifyWithinBudget loads every program of the object alone
// (with small hash maps: sizes do not change what is verified), under
// each of budgetConfigs, and reads how many instructions the verifier
// processed.
func TestProgramsVerifyWithinBudget(t *testing.T) {
	testutil.RequireBPF(t)
	for _, c := range budgetConfigs {
		t.Run(c.name, func(t *testing.T) {
			spec, err := loadLeak()
			if err != nil {
				t.Fatal(err)
			}
			buckets, _ := allocTables(c.c.MaxAllocations)
			if err := setConstants(spec, c.c, buckets, siteCopies()); err != nil {
				t.Fatal(err)
			}
			verifyWithinBudget(t, spec)
		})
	}
}

func verifyWithinBudget(t *testing.T, spec *ebpf.CollectionSpec) {
	maps := map[string]*ebpf.MapSpec{}
	for name, m := range spec.Maps {
		m = m.Copy()
		if m.Type == ebpf.Hash && m.MaxEntries > 1024 {
			m.MaxEntries = 1024
		}
		maps[name] = m
	}
	for name, p := range spec.Programs {
		if why := lacksHook(name); why != "" {
			// As Load does: it loads a stand-in (target_exit) or the
			// plain programs (alloc_session) instead.
			t.Logf("%s: not verified: %s", name, why)
			continue
		}
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
				t.Fatalf("verifier refused %s: %v", name, verifierDetail(err))
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

// lacksHook says why the running kernel cannot load program name at all,
// whatever its code, "" when it can: target_exit needs
// sched_process_exit's group_dead and alloc_session uprobe sessions
// (Linux 6.13), and Load does without both (useExitHook,
// Features.NoSession).
func lacksHook(name string) string {
	switch name {
	case "target_exit":
		if !exitHookSupported() {
			return "this kernel's sched_process_exit has no group_dead (before 6.13)"
		}
	case "alloc_session":
		if !sessionsSupported() {
			return "this kernel has no uprobe sessions (kfunc bpf_session_is_return, 6.13)"
		}
	}
	return ""
}

// TestVerifierRefusalIsOneLine: a program the verifier refuses (it reads a
// register nothing wrote), loaded in a collection as Load does, is
// reported in one line that names the program, the kernel and the
// verifier's reason, and still wraps the verifier's error; with
// LEAKSCOPE_VERIFIER_LOG=1 with the whole log.
func TestVerifierRefusalIsOneLine(t *testing.T) {
	testutil.RequireBPF(t)
	_, err := ebpf.NewCollection(&ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"bad_prog": {
		Type:         ebpf.SocketFilter,
		Instructions: asm.Instructions{asm.Mov.Reg(asm.R0, asm.R3), asm.Return()},
		License:      "MIT",
	}}})
	if err == nil {
		t.Fatal("the verifier accepted a read of an unwritten register")
	}
	refusal := verifierDetail(err)
	short := refusal.Error()
	want := "program bad_prog: the BPF verifier of Linux " + kernelRelease() + " refused it: R3 !read_ok (processed "
	if !strings.HasPrefix(short, want) || !strings.Contains(short, "EACCES); LEAKSCOPE_VERIFIER_LOG=1") || strings.Contains(short, "\n") {
		t.Errorf("refusal = %q, want one line beginning %q, with the errno", short, want)
	}
	var ve *ebpf.VerifierError
	if !errors.As(refusal, &ve) || !errors.Is(refusal, unix.EACCES) {
		t.Errorf("the refusal does not wrap the verifier's error: %#v", refusal)
	}
	t.Setenv("LEAKSCOPE_VERIFIER_LOG", "1")
	long := verifierDetail(err).Error()
	if !strings.HasPrefix(long, "program bad_prog: ") || !strings.Contains(long, "0: (bf) r0 = r3") || !strings.Contains(long, "R3 !read_ok") {
		t.Errorf("with LEAKSCOPE_VERIFIER_LOG=1 the refusal lacks the program or the log's instructions: %q", long)
	}
	if other := errors.New("no such file"); verifierDetail(other) != other {
		t.Error("an error that is no refusal was rewritten")
	}
}

// TestVerifierReason: the reason and count of a refusal, from the tails
// of real logs of this kernel (a walker over the 1M-instruction limit; a
// read of an unwritten register).
func TestVerifierReason(t *testing.T) {
	for _, c := range []struct {
		log           []string
		reason, stats string
	}{
		{
			log: []string{
				"3954: (bf) r3 = r6",
				"BPF program is too large. Processed 1000001 insn",
				"verification time 30954754 usec",
				"stack depth 256+0+8+0+128+104+8+8+0",
				"processed 1000001 insns (limit 1000000) max_states_per_insn 24 total_states 58576 peak_states 128575 mark_read 0",
				"",
			},
			reason: "BPF program is too large. Processed 1000001 insn",
			stats:  "processed 1000001 insns (limit 1000000) max_states_per_insn 24 total_states 58576 peak_states 128575 mark_read 0",
		},
		{
			log:    []string{"0: R1=ctx() R10=fp0", "0: (bf) r0 = r3", "R3 !read_ok", "processed 1 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0"},
			reason: "R3 !read_ok",
			stats:  "processed 1 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0",
		},
		{log: nil, reason: "no reason in its log"},
	} {
		reason, stats := verifierReason(c.log)
		if reason != c.reason || stats != c.stats {
			t.Errorf("verifierReason(%q) = %q, %q; want %q, %q", c.log, reason, stats, c.reason, c.stats)
		}
	}
}
