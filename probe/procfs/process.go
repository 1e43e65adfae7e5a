package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Command returns the target's argument vector from /proc/<pid>/cmdline.
// It is empty for kernel threads and zombies. A process that rewrote its
// argv (setproctitle) may show a single space-joined element.
func Command(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, procError(pid, "cmdline", err)
	}
	return parseCmdline(data), nil
}

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
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, procError(pid, "stat", err)
	}
	flags, err := parseStatFlags(data)
	if err != nil {
		return false, fmt.Errorf("process %d: %w", pid, err)
	}
	return flags&pfKthread != 0, nil
}

// parseStatFlags returns field 9 (flags) of a /proc/<pid>/stat line. Field 2
// is the command name in parentheses and may itself contain spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatFlags(data []byte) (uint64, error) {
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("parse stat: no ')' closing the command name")
	}
	// After ") ": state(3) ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8) flags(9).
	fields := strings.Fields(s[i+1:])
	const flagsIndex = 9 - 3
	if len(fields) <= flagsIndex {
		return 0, fmt.Errorf("parse stat: %d fields after the command name, want at least %d", len(fields), flagsIndex+1)
	}
	flags, err := strconv.ParseUint(fields[flagsIndex], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse stat flags %q: %w", fields[flagsIndex], err)
	}
	return flags, nil
}
