package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestBudgetFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct{ limit, live, other, want int64 }{
		{72 * mib, 40 * mib, 8 * mib, 72 * mib},              // 40*1.25+8 = 58: the limit stands
		{72 * mib, 57 * mib, 8 * mib, 80 * mib},              // 57*1.25+8 = 79.25, rounded up
		{72 * mib, 400 * mib, 8 * mib, 508 * mib},            // a big capture: the heap may still grow 25%
		{72 * mib, 0, 0, 72 * mib},                           // metrics not there yet
		{1 * mib, 4*mib + 1, 0, 6 * mib},                     // 5 MiB + 1.25 bytes: the next MiB
		{96 * mib, 64 * mib, 16 * mib, 96 * mib},             // exactly at the limit
		{96 * mib, 64*mib + 4, 16 * mib, 97 * mib},           // just over it
		{0x7fffffffffffffff, 1 << 40, 0, 0x7fffffffffffffff}, // no limit: never lowered
	} {
		if got := budgetFor(tc.limit, tc.live, tc.other); got != tc.want {
			t.Errorf("budgetFor(%d, %d, %d) = %d MiB + %d, want %d MiB + %d",
				tc.limit, tc.live, tc.other, got/mib, got%mib, tc.want/mib, tc.want%mib)
		}
	}
}

// budgetCmd is a command with --memory-limit, its flags parsed from args.
func budgetCmd(t *testing.T, b *memoryBudget, args ...string) *cobra.Command {
	t.Helper()
	root := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	b.register(root)
	if err := root.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return root
}

// A live heap over the limit raises it, so the collector is not left
// collecting without end; stop puts back the limit there was before.
func TestMemoryBudgetFollowsLiveHeap(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	var b memoryBudget
	if err := b.start(budgetCmd(t, &b, "--memory-limit", "8MiB")); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != 8<<20 {
		b.stop()
		t.Fatalf("limit after start: %d, want 8 MiB", got)
	}
	live := make([]byte, 64<<20)
	for i := range live {
		live[i] = byte(i)
	}
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	raised := debug.SetMemoryLimit(-1)
	for raised < 80<<20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		runtime.GC()
		raised = debug.SetMemoryLimit(-1)
	}
	runtime.KeepAlive(live)
	b.stop()
	if raised < 80<<20 {
		t.Errorf("limit with 64 MiB live: %d MiB, want at least 80 (1.25 times the live heap)", raised>>20)
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit after stop: %d, want %d as before start", got, before)
	}
}

// GOMEMLIMIT in the environment replaces the default, not a limit given
// on the command line; --memory-limit 0 sets none, not even the
// environment's.
func TestMemoryBudgetEnvironment(t *testing.T) {
	// The limit GOMEMLIMIT=1GiB would have set at start-up.
	const env = 1 << 30
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(env))
	for _, tc := range []struct {
		env  string
		args []string
		want int64
	}{
		{"1GiB", nil, env},
		{"1GiB", []string{"--memory-limit", "16MiB"}, 16 << 20},
		{"1GiB", []string{"--memory-limit", "0"}, math.MaxInt64},
		{"", []string{"--memory-limit", "0"}, math.MaxInt64},
		{"", nil, 72 << 20},
	} {
		t.Setenv("GOMEMLIMIT", tc.env)
		var b memoryBudget
		if err := b.start(budgetCmd(t, &b, tc.args...)); err != nil {
			t.Fatal(err)
		}
		got := debug.SetMemoryLimit(-1)
		b.stop()
		if got != tc.want {
			t.Errorf("GOMEMLIMIT=%q %v: limit %d, want %d", tc.env, tc.args, got, tc.want)
		}
		if after := debug.SetMemoryLimit(-1); after != env {
			t.Errorf("GOMEMLIMIT=%q %v: limit after stop %d, want %d", tc.env, tc.args, after, env)
		}
	}
}
