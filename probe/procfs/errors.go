package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// ErrNoProcess is wrapped by every error caused by the target process not
// existing (or having exited while it was read). Match it with errors.Is.
var ErrNoProcess = errors.New("not found")

// procError gives an error from reading /proc/<pid>/<file> the context a user
// needs to act on it: a missing process becomes "process 4242 not found"
// wrapping ErrNoProcess, and a permission error says which privilege is
// missing.
func procError(pid int, file string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		// ESRCH: the process exited between open and read.
		return fmt.Errorf("process %d %w", pid, ErrNoProcess)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("read %s of process %d: %w (run as root, or with CAP_SYS_PTRACE over the target)", file, pid, err)
	default:
		return fmt.Errorf("read %s of process %d: %w", file, pid, err)
	}
}
