package uprobe

import "errors"

// Errors an attachment wraps (probe returns them as probe.ErrTargetExited
// and probe.ErrPrivilege).
var (
	// ErrTargetExited means the target process ended while it was traced.
	ErrTargetExited = errors.New("target exited")
	// ErrPrivilege means the kernel refused to load or attach BPF programs.
	ErrPrivilege = errors.New("not permitted: run as root or grant CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE")
)
