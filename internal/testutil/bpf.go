// Package testutil holds helpers shared by leakscope's tests: skipping BPF
// tests with a stated reason, golden files.
package testutil

import (
	"os"
	"testing"
)

// RequireBPF skips tb unless this process can load BPF programs.
// With LEAKSCOPE_REQUIRE_BPF=1 (CI) it fails instead of skipping.
func RequireBPF(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		skipOrFail(tb, "BPF test skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		skipOrFail(tb, "needs root (CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE)")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		skipOrFail(tb, "kernel has no BTF (/sys/kernel/btf/vmlinux)")
	}
	if _, err := os.Stat("/sys/bus/event_source/devices/uprobe/type"); err != nil {
		skipOrFail(tb, "kernel has no uprobe PMU")
	}
}

// SkipOrFail skips tb with reason, or fails it when LEAKSCOPE_REQUIRE_BPF=1.
func SkipOrFail(tb testing.TB, reason string) {
	tb.Helper()
	skipOrFail(tb, reason)
}

func skipOrFail(tb testing.TB, reason string) {
	tb.Helper()
	if os.Getenv("LEAKSCOPE_REQUIRE_BPF") == "1" {
		tb.Fatalf("LEAKSCOPE_REQUIRE_BPF=1 but: %s", reason)
	}
	tb.Skip(reason)
}

// SkipOptional skips tb for a prerequisite that machines of this kind may
// lack and CI does not install (Temurin 25 at its usual path): a skip
// naming what is absent, even with LEAKSCOPE_REQUIRE_BPF=1. Everything CI
// installs goes through SkipOrFail instead.
func SkipOptional(tb testing.TB, reason string) {
	tb.Helper()
	tb.Skip(reason)
}
