package procfs

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

func TestReadStatusSelf(t *testing.T) {
	s, err := ReadStatus(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.UID[1] != os.Geteuid() || s.GID[1] != os.Getegid() {
		t.Errorf("effective ids %d/%d, want %d/%d", s.UID[1], s.GID[1], os.Geteuid(), os.Getegid())
	}
	if len(s.NSpid) == 0 || s.NSpid[0] != os.Getpid() {
		t.Errorf("NSpid = %v, want it to start with %d", s.NSpid, os.Getpid())
	}
	// The Go runtime handles SIGURG (preemption) in every program.
	if !s.Catches(int(syscall.SIGURG)) {
		t.Errorf("SigCgt %x: SIGURG not caught", s.SigCgt)
	}
	if _, err := ReadStatus(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("ReadStatus(missing pid) error %v, want ErrNoProcess", err)
	}
}
