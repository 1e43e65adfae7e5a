package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/leakscope/leakscope/probe/track"
)

// complete runs cobra's hidden __complete command, as the shell scripts
// do, and returns the candidates (without descriptions) and the
// directive.
func complete(t *testing.T, args ...string) ([]string, cobra.ShellCompDirective, []string) {
	t.Helper()
	io, out, errb := streams()
	if code := execute(context.Background(), append([]string{"__complete"}, args...), io); code != 0 {
		t.Fatalf("__complete %q: exit %d, stderr %q", args, code, errb.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	d, err := strconv.Atoi(strings.TrimPrefix(last, ":"))
	if !strings.HasPrefix(last, ":") || err != nil {
		t.Fatalf("__complete %q printed %q: no directive", args, out.String())
	}
	var names []string
	for _, l := range lines[:len(lines)-1] {
		name, _, _ := strings.Cut(l, "\t")
		names = append(names, name)
	}
	return names, cobra.ShellCompDirective(d), lines[:len(lines)-1]
}

func TestCompleteFlagValues(t *testing.T) {
	var presets []string
	for _, p := range track.Presets() {
		presets = append(presets, "preset:"+p)
	}
	const (
		noFile  = cobra.ShellCompDirectiveNoFileComp
		fileExt = cobra.ShellCompDirectiveFilterFileExt
	)
	for _, tc := range []struct {
		args []string
		want []string
		dir  cobra.ShellCompDirective
	}{
		{[]string{"attach", "--format", ""}, []string{"text", "json", "html", "pprof"}, noFile},
		{[]string{"run", "--format", "j"}, []string{"json"}, noFile},
		{[]string{"report", "--format", "p"}, []string{"pprof"}, noFile},
		{[]string{"run", "--malloc", ""}, []string{"auto", "on", "off"}, noFile},
		{[]string{"attach", "--unwind", ""}, []string{"auto", "fp", "dwarf"}, noFile},
		{[]string{"run", "--group-by", ""}, []string{"stack", "frame"}, noFile},
		{[]string{"report", "--group-by", "f"}, []string{"frame"}, noFile},
		{[]string{"attach", "--progress", ""}, []string{"auto", "always", "never"}, noFile},
		{[]string{"run", "--track", ""}, presets, noFile},
		{[]string{"run", "--track", "preset:bzip2,preset:s"}, []string{"preset:bzip2,preset:stdio"}, noFile},
		{[]string{"run", "--kind", "zlib."}, []string{"zlib.*", "zlib.deflate", "zlib.inflate"}, noFile},
		{[]string{"run", "--interval", ""}, nil, noFile},
		{[]string{"attach", "--top", ""}, nil, noFile},
		{[]string{"report", "--http", ""}, nil, noFile},
		{[]string{"run", "--memory-limit", ""}, nil, noFile},
		{[]string{"run", "-o", ""}, nil, cobra.ShellCompDirectiveDefault},
		{[]string{"attach", "--save", ""}, nil, cobra.ShellCompDirectiveDefault},
		{[]string{"run", "--report-dir", ""}, nil, cobra.ShellCompDirectiveFilterDirs},
		{[]string{"run", "--track-file", ""}, []string{"yaml", "yml", "json"}, fileExt},
		{[]string{"report", ""}, []string{"capture"}, fileExt},
		{[]string{"report", "a.capture", ""}, nil, noFile},
		{[]string{"diff", ""}, []string{"capture"}, fileExt},
		{[]string{"diff", "a.capture", ""}, []string{"capture"}, fileExt},
		{[]string{"diff", "a.capture", "b.capture", ""}, nil, noFile},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, dir, _ := complete(t, tc.args...)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || dir != tc.dir {
				t.Errorf("completed %q with directive %d, want %q with %d", got, dir, tc.want, tc.dir)
			}
		})
	}
}

// Every value completion offers is one the command accepts.
func TestCompletionValuesAccepted(t *testing.T) {
	noRun := func(context.Context, *runOptions) error { return nil }
	noReport := func(context.Context, *reportOptions) error { return nil }
	for flag, values := range completionValues {
		for _, v := range values {
			v, _, _ = strings.Cut(v, "\t")
			args := []string{"--" + flag, v}
			if flag == "format" {
				args = append(args, "-o", "out")
			}
			io, _, _ := streams()
			if flag == "log-format" { // agent's alone
				cmd := newAgentCmd(io, func(context.Context, *agentOptions) error { return nil })
				cmd.SetArgs(append(args, "--select", "comm=x"))
				if err := cmd.Execute(); err != nil {
					t.Errorf("agent %s: %v", strings.Join(args, " "), err)
				}
				continue
			}
			cmd := newRunCmd(io, noRun)
			cmd.SetArgs(append(args, "--", "true"))
			cmd.SetErr(&strings.Builder{})
			if err := cmd.Execute(); err != nil {
				t.Errorf("run %s: %v", strings.Join(args, " "), err)
			}
			if flag == "format" || flag == "group-by" {
				cmd := newReportCmd(io, noReport)
				cmd.SetArgs(append(args, "x.capture"))
				if err := cmd.Execute(); err != nil {
					t.Errorf("report %s: %v", strings.Join(args, " "), err)
				}
			}
		}
	}
	for _, p := range track.Presets() {
		cmd := newRunCmd(ioStreams{}, noRun)
		cmd.SetArgs([]string{"--track", "preset:" + p, "--", "true"})
		if err := cmd.Execute(); err != nil {
			t.Errorf("--track preset:%s: %v", p, err)
		}
	}
}

// --pid completes live processes as "PID\tcomm".
func TestCompletePids(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	pid := strconv.Itoa(sleep.Process.Pid)
	// Start returns once exec has closed the child's close-on-exec
	// files, which the kernel does before it writes the new program's
	// command line: wait for the exec to have finished.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		if len(cmdline) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep (pid %s) has no command line after 10s", pid)
		}
	}
	for _, cmd := range []string{"attach", "doctor"} {
		names, dir, lines := complete(t, cmd, "--pid", "")
		if dir != cobra.ShellCompDirectiveNoFileComp {
			t.Errorf("%s --pid: directive %d", cmd, dir)
		}
		found := false
		for _, l := range lines {
			found = found || l == pid+"\tsleep"
		}
		if !found {
			t.Errorf("%s --pid: no %q among %d candidates", cmd, pid+"\tsleep", len(lines))
		}
		for i := 1; i < len(names); i++ {
			a, _ := strconv.Atoi(names[i-1])
			b, _ := strconv.Atoi(names[i])
			if a >= b {
				t.Errorf("%s --pid: %s before %s", cmd, names[i-1], names[i])
			}
		}
	}
	// Typed digits narrow the list.
	names, _, _ := complete(t, "attach", "-p", pid)
	if len(names) == 0 {
		t.Fatalf("attach -p %s: nothing", pid)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, pid) {
			t.Errorf("attach -p %s offered %s", pid, n)
		}
	}
}

// Kernel threads (no command line), processes gone meanwhile, leakscope
// itself and names other than pids are not offered; a pid's digits narrow
// the list.
func TestPidCompletionsSkipUntraceable(t *testing.T) {
	proc := t.TempDir()
	write := func(name, data string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(proc, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("100/cmdline", "./server\x00--port\x008080\x00")
	write("100/comm", "server\n")
	write("2/cmdline", "") // kthreadd
	write("2/comm", "kthreadd\n")
	write("7/comm", "gone\n") // no cmdline: exited
	write("42/cmdline", "leakscope\x00")
	write("42/comm", "leakscope\n")
	write("1000/cmdline", "sh\x00")
	write("1000/comm", "sh\n")
	write("self/comm", "x\n")
	got := pidCompletions(proc, "", 42)
	if want := []string{"100\tserver", "1000\tsh"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := pidCompletions(proc, "100", 42); strings.Join(got, "|") != "100\tserver|1000\tsh" {
		t.Errorf("prefix 100: %q", got)
	}
	if got := pidCompletions(proc, "1000", 42); strings.Join(got, "|") != "1000\tsh" {
		t.Errorf("prefix 1000: %q", got)
	}
}
