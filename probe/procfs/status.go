package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Status is what leakscope reads from /proc/<pid>/status: the process's
// credentials, its pid in each pid namespace, the signals it catches and
// its peak resident set.
type Status struct {
	// UID and GID are the real, effective, saved and filesystem ids, as
	// seen from this process's user namespace.
	UID, GID [4]int
	// NSpid is the pid in each pid namespace the process belongs to, from
	// the outermost (ours) to the innermost (its own view, what getpid
	// returns in the process). It has one element outside containers.
	NSpid []int
	// SigCgt is the mask of signals the process has a handler for: bit
	// n-1 is signal n.
	SigCgt uint64
	// VmHWM is the peak resident set size in KiB: since the process
	// started, or since it wrote 5 to /proc/<pid>/clear_refs. 0 when the
	// line is absent (a kernel thread).
	VmHWM uint64
}

// OwnPid is the process's pid in its own pid namespace, the pid it names
// its files after (a JVM's /tmp/.java_pid<pid>).
func (s Status) OwnPid() int {
	if len(s.NSpid) == 0 {
		return 0
	}
	return s.NSpid[len(s.NSpid)-1]
}

// Catches reports whether the process has a handler installed for signal
// sig, so that sending it will not run the default action (often: exit).
func (s Status) Catches(sig int) bool {
	return sig >= 1 && sig <= 64 && s.SigCgt&(1<<(sig-1)) != 0
}

// ReadStatus reads and parses /proc/<pid>/status.
func ReadStatus(pid int) (Status, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Status{}, procError(pid, "status", err)
	}
	s, err := ParseStatus(data)
	if err != nil {
		return Status{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return s, nil
}

// ParseStatus parses the content of a /proc/<pid>/status file. Uid, Gid
// and SigCgt are required; NSpid is absent before Linux 4.1, and then the
// Pid line stands in for it.
func ParseStatus(data []byte) (Status, error) {
	var s Status
	var pid int
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		var err error
		switch key {
		case "Uid", "Gid":
			ids := &s.UID
			if key == "Gid" {
				ids = &s.GID
			}
			f := strings.Fields(val)
			if len(f) != 4 {
				return Status{}, fmt.Errorf("parse status %s: want 4 ids, got %q", key, val)
			}
			for i := range f {
				if ids[i], err = parseID(f[i]); err != nil {
					return Status{}, fmt.Errorf("parse status %s: %w", key, err)
				}
			}
		case "NSpid":
			s.NSpid = s.NSpid[:0]
			for _, f := range strings.Fields(val) {
				p, err := parseID(f)
				if err != nil || p == 0 {
					return Status{}, fmt.Errorf("parse status NSpid %q: not a pid", val)
				}
				s.NSpid = append(s.NSpid, p)
			}
		case "Pid":
			if pid, err = parseID(val); err != nil {
				return Status{}, fmt.Errorf("parse status Pid: %w", err)
			}
		case "SigCgt":
			if s.SigCgt, err = strconv.ParseUint(val, 16, 64); err != nil {
				return Status{}, fmt.Errorf("parse status SigCgt %q: not a hex mask", val)
			}
		case "VmHWM":
			kb, ok := strings.CutSuffix(val, " kB")
			if s.VmHWM, err = strconv.ParseUint(kb, 10, 64); !ok || err != nil {
				return Status{}, fmt.Errorf("parse status VmHWM %q: not a size in kB", val)
			}
		default:
			continue
		}
		seen[key] = true
	}
	if err := sc.Err(); err != nil {
		return Status{}, fmt.Errorf("read status: %w", err)
	}
	for _, k := range []string{"Uid", "Gid", "SigCgt"} {
		if !seen[k] {
			return Status{}, fmt.Errorf("parse status: no %s line", k)
		}
	}
	if len(s.NSpid) == 0 && pid > 0 {
		s.NSpid = []int{pid}
	}
	return s, nil
}

// parseID parses a non-negative decimal id (uid, gid or pid) that fits an int32.
func parseID(f string) (int, error) {
	v, err := strconv.ParseUint(f, 10, 32)
	if err != nil || v > 1<<31-1 {
		return 0, fmt.Errorf("%q is not an id", f)
	}
	return int(v), nil
}
