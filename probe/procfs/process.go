package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Command returns the target's argument vector from /proc/<pid>/cmdline.
// It is empty for kernel threads and zombies. A process that rewrote its
// argv (setproctitle) may show a single space-joined element.
func Command(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, procError(pid, "cmdline", err)
	}
	return trimTitle(parseCmdline(data)), nil
}

// trimTitle drops the empty arguments at the end of a command line: a
// process that wrote its title over its arguments (redis-server,
// nginx, postgres: setproctitle) leaves the rest of that memory NULs,
// which /proc/PID/cmdline reads as empty arguments, dozens of them. ps
// shows such a line without them; so does leakscope, at the cost of a
// real empty last argument.
func trimTitle(args []string) []string {
	n := len(args)
	for n > 1 && args[n-1] == "" {
		n--
	}
	return args[:n]
}

// Environ returns the target's environment from /proc/<pid>/environ, as
// it was when its program image started.
func Environ(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, procError(pid, "environ", err)
	}
	return parseCmdline(data), nil
}

// parseCmdline splits NUL-terminated strings (cmdline, environ).
func parseCmdline(data []byte) []string {
	data = bytes.TrimSuffix(data, []byte{0})
	if len(data) == 0 {
		return []string{}
	}
	return strings.Split(string(data), "\x00")
}

// pfKthread is PF_KTHREAD from include/linux/sched.h.
const pfKthread = 0x00200000

// IsKernelThread reports whether pid is a kernel thread, which has no user
// address space to probe. It reads the PF_KTHREAD bit of the flags field
// (field 9) of /proc/<pid>/stat rather than guessing from an empty cmdline,
// which zombies and processes that cleared their argv also have.
func IsKernelThread(pid int) (bool, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return false, err
	}
	return st.Flags&pfKthread != 0, nil
}

// Stat is what leakscope reads from /proc/<pid>/stat.
type Stat struct {
	State     byte   // field 3: R, S, D, T (stopped), t, Z (zombie), X, …
	PPid      int    // field 4
	Flags     uint64 // field 9: PF_* bits
	StartTime uint64 // field 22: clock ticks after boot
	// ExitCode is field 52, the wait status of a zombie (Linux 3.5+);
	// 0 while the process runs, or when the field is missing.
	ExitCode uint32
}

// ReadStat reads and parses /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, procError(pid, "stat", err)
	}
	st, err := ParseStat(data)
	if err != nil {
		return Stat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return st, nil
}

// ParseStat parses a /proc/<pid>/stat line. Field 2 is the command name
// in parentheses and may itself contain spaces and parentheses, so fields
// are counted from the last ')'.
func ParseStat(data []byte) (Stat, error) {
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, errors.New("parse stat: no ')' closing the command name")
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3
	field := func(n int) (uint64, error) {
		if len(fields) <= n-3 {
			return 0, fmt.Errorf("parse stat: %d fields after the command name, want at least %d", len(fields), n-2)
		}
		v, err := strconv.ParseUint(fields[n-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse stat field %d %q: %w", n, fields[n-3], err)
		}
		return v, nil
	}
	var st Stat
	if len(fields) == 0 || len(fields[0]) != 1 {
		return Stat{}, errors.New("parse stat: no one-letter state after the command name")
	}
	st.State = fields[0][0]
	ppid, err := field(4)
	if err != nil {
		return Stat{}, err
	}
	if ppid > 1<<22 { // PID_MAX_LIMIT
		return Stat{}, fmt.Errorf("parse stat: parent pid %d out of range", ppid)
	}
	st.PPid = int(ppid)
	if st.Flags, err = field(9); err != nil {
		return Stat{}, err
	}
	if st.StartTime, err = field(22); err != nil {
		return Stat{}, err
	}
	if len(fields) > 52-3 {
		if v, err := field(52); err == nil && v <= 0xffff {
			st.ExitCode = uint32(v)
		}
	}
	return st, nil
}

// userHZ is the unit of /proc/<pid>/stat's times (USER_HZ), 100 on every
// Linux architecture leakscope runs on.
const userHZ = 100

// Age is how long process pid has been running.
func Age(pid int) (time.Duration, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return 0, err
	}
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, fmt.Errorf("read /proc/uptime: %w", err)
	}
	up, err := parseUptime(data)
	if err != nil {
		return 0, err
	}
	started := time.Duration(st.StartTime) * time.Second / userHZ
	if started > up {
		return 0, nil
	}
	return up - started, nil
}

// parseUptime parses /proc/uptime's first number, seconds since boot.
func parseUptime(data []byte) (time.Duration, error) {
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, errors.New("parse /proc/uptime: empty")
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil || secs < 0 || secs > 1e12 {
		return 0, fmt.Errorf("parse /proc/uptime %q: not a number of seconds", f[0])
	}
	return time.Duration(secs * float64(time.Second)), nil
}
