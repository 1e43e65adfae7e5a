package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
)

// Every row names the code responsible: a C++ program leaking new objects
// and std::vector/std::string storage through libstdc++ (-O2), and the
// Kafka-style JVM reproduction, whose stack runs through JNI and the JDK.
func TestCulpritIsTheProgramsOwnCode(t *testing.T) {
	testutil.RequireBPF(t)
	testutil.RequireJava(t)
	leakscope, _ := buildAll(t, "leaky")
	cpp := filepath.Join(t.TempDir(), "cppleak")
	if b, err := exec.Command("g++", "-O2", "-g", "-o", cpp, filepath.Join("testdata", "cppleak.cc")).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, b)
	}
	classes := testutil.JavaClasses(t, filepath.Join("..", "..", "examples", "java", "KafkaRecovery.java"))
	for _, c := range []struct {
		name string
		argv []string
		want map[string]uint64 // culprit function: live count of its rows together
	}{
		// 20 rounds: a Conn each; a vector object and its last
		// storage; a string object and its buffer.
		{"C++", []string{cpp}, map[string]uint64{"open_conn()": 20, "remember_name(int)": 40, "grow_table(int)": 40}},
		{"JVM", []string{"java", "-cp", classes, "KafkaRecovery"}, map[string]uint64{"KafkaRecovery.recoverSegment": 50}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.json")
			cmd := exec.Command(leakscope, append([]string{"run", "--progress", "never", "--format", "json", "-o", out, "--"}, c.argv...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			r := readReport(t, out)
			got := map[string]uint64{}
			rows := map[string]int{}
			for _, l := range r.Leaks {
				if l.Culprit == nil {
					t.Errorf("rank %d has no culprit", l.Rank)
					continue
				}
				if _, ok := c.want[l.Culprit.Function]; ok {
					got[l.Culprit.Function] += l.OutstandingCount
					rows[l.Culprit.Function]++
				}
			}
			for fn, n := range c.want {
				if got[fn] != n {
					t.Errorf("culprit %s: %d live in %d rows, want %d", fn, got[fn], rows[fn], n)
				}
			}
			if c.name == "JVM" && (rows["KafkaRecovery.recoverSegment"] != 1 || r.Leaks[0].Culprit.Function != "KafkaRecovery.recoverSegment" ||
				r.Leaks[0].Culprit.File != "KafkaRecovery.java" || r.Leaks[0].Culprit.Line == 0) {
				t.Errorf("rank 1's culprit %+v in %d rows, want KafkaRecovery.recoverSegment with its line, one row", r.Leaks[0].Culprit, rows["KafkaRecovery.recoverSegment"])
			}
		})
	}
}
