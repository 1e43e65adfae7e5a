package procfs

import (
	"errors"
	"fmt"
	"github.com/leakscope/leakscope/internal/testutil"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCommandSelf(t *testing.T) {
	got, err := Command(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, os.Args) {
		t.Errorf("Command(self) = %q, want os.Args %q", got, os.Args)
	}
	if _, err := Command(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Command(missing pid) error %v, want ErrNoProcess", err)
	}
}

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"/bin/sh\x00-c\x00echo a b\x00", []string{"/bin/sh", "-c", "echo a b"}},
		{"nginx: worker process", []string{"nginx: worker process"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
	}
	for _, tt := range tests {
		if got := parseCmdline([]byte(tt.in)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseCmdline(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// redis-server 7.0 writes its title over its arguments and leaves the
// rest of them NULs: its /proc/PID/cmdline, as read on Debian 12.
func TestCommandDropsTheTitlesPadding(t *testing.T) {
	redis := "redis-server 127.0.0.1:7399" + strings.Repeat("\x00", 52)
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{redis, []string{"redis-server 127.0.0.1:7399"}},
		{"/bin/sh\x00-c\x00echo a b\x00", []string{"/bin/sh", "-c", "echo a b"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
		{"\x00\x00", []string{""}},
		{"", []string{}},
	} {
		if got := trimTitle(parseCmdline([]byte(tt.in))); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("command of %q = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		stat    string
		want    Stat
		kthread bool
	}{
		// kthreadd and a user process, captured from this machine.
		{"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 25 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			Stat{State: 'S', PPid: 0, Flags: 2129984, StartTime: 25}, true},
		{"4864 (cat) T 4859 4859 3437 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 41047 3133440 389\n",
			Stat{State: 'T', PPid: 4859, Flags: 4194304, StartTime: 41047}, false},
		// A command name with spaces and parentheses.
		{"77 (a) b (c)) Z 1 77 77 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 99\n",
			Stat{State: 'Z', PPid: 1, Flags: 4194560, StartTime: 99}, false},
		// A zombie that exited with code 3: field 52 is its wait status.
		{"9 (leaky) Z 8 9 9 0 -1 4227084 118 0 0 0 0 0 0 0 20 0 1 0 6100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 768\n",
			Stat{State: 'Z', PPid: 8, Flags: 4227084, StartTime: 6100, ExitCode: 768}, false},
	}
	for _, tt := range tests {
		got, err := ParseStat([]byte(tt.stat))
		if err != nil {
			t.Errorf("ParseStat(%q): %v", tt.stat, err)
			continue
		}
		if got != tt.want || (got.Flags&pfKthread != 0) != tt.kthread {
			t.Errorf("ParseStat(%q) = %+v, want %+v (kernel thread %v)", tt.stat, got, tt.want, tt.kthread)
		}
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 0 0 0 0 -1", "1 (x) S 0 0 0 0 -1 abc",
		"1 (x) S 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0", "1 (x) SS 0 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
		"1 (x) S 99999999 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5"} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q): no error", bad)
		}
	}
}

func TestIsKernelThread(t *testing.T) {
	if kt, err := IsKernelThread(os.Getpid()); err != nil || kt {
		t.Errorf("IsKernelThread(self) = %v, %v; want false, nil", kt, err)
	}
	if _, err := IsKernelThread(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("IsKernelThread(missing pid) error %v, want ErrNoProcess", err)
	}
	// kthreadd is pid 2 in the initial PID namespace; inside a container
	// pid 2 is an ordinary process, so only check it when it is kthreadd.
	comm, err := os.ReadFile("/proc/2/comm")
	if err != nil || string(comm) != "kthreadd\n" {
		testutil.SkipOrFail(t, fmt.Sprintf("pid 2 is not kthreadd here (comm %q, %v): live kernel-thread check skipped", comm, err))
	}
	if kt, err := IsKernelThread(2); err != nil || !kt {
		t.Errorf("IsKernelThread(2) = %v, %v; want true, nil", kt, err)
	}
	if cmd, err := Command(2); err != nil || len(cmd) != 0 {
		t.Errorf("Command(2) = %q, %v; want empty", cmd, err)
	}
}

func TestAge(t *testing.T) {
	if d, err := parseUptime([]byte("12345.67 2345.10\n")); err != nil || d != 12345670*time.Millisecond {
		t.Errorf("parseUptime = %v, %v", d, err)
	}
	for _, bad := range []string{"", "x 1", "-1 2", "1e300 1"} {
		if _, err := parseUptime([]byte(bad)); err == nil {
			t.Errorf("parseUptime(%q): no error", bad)
		}
	}
	age, err := Age(os.Getpid())
	if err != nil || age < 0 || age > time.Hour {
		t.Errorf("Age(self) = %v, %v", age, err)
	}
	// The parent (go test) started before this process.
	if p, err := Age(os.Getppid()); err != nil || p+10*time.Millisecond < age {
		t.Errorf("Age(parent) = %v, %v; self %v", p, err, age)
	}
}
