package analyze

import (
	"testing"
	"time"
)

func TestTargetStatusAndScope(t *testing.T) {
	code := func(c int) *int { return &c }
	for _, tt := range []struct {
		t      Target
		status string
		scope  string
	}{
		{Target{}, "", ""},
		{Target{ExitCode: code(0)}, "exited with code 0", ""},
		{Target{ExitCode: code(3)}, "exited with code 3", ""},
		{Target{ExitCode: code(139)}, "exited with code 139 (killed by SIGSEGV)", ""},
		{Target{ExitCode: code(143), Ended: "terminated by leakscope at --duration (SIGTERM)"},
			"exited with code 143 (killed by SIGTERM): terminated by leakscope at --duration (SIGTERM)", ""},
		{Target{ExitCode: code(128 + 40)}, "exited with code 168 (killed by signal 40)", ""},
		{Target{KeptRunning: true}, "still running (--keep-running)", ""},
		{Target{AttachedAfter: 90 * time.Minute, Runtime: RuntimeNative}, "",
			"attached 1h30m after the process started: what it allocated before is not seen (its releases count as unknown frees)"},
		{Target{AttachedAfter: 3 * time.Second, Runtime: RuntimeJVM}, "",
			"attached 3s after the process started: what it allocated before is not seen (its releases count as unknown frees); a JVM's start-up allocations are seen only with leakscope run"},
	} {
		if got := tt.t.Status(); got != tt.status {
			t.Errorf("%+v.Status() = %q, want %q", tt.t, got, tt.status)
		}
		if got := tt.t.Scope(); got != tt.scope {
			t.Errorf("%+v.Scope() = %q, want %q", tt.t, got, tt.scope)
		}
	}
}
