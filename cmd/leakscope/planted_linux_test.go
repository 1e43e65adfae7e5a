package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leakscope/leakscope/internal/testutil"
)

// asNobody runs a shell script as the unprivileged user nobody, as an
// attacker sharing the machine would.
func asNobody(t *testing.T, script string, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root to act as another user (setpriv)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testutil.SkipOrFail(t, "setpriv (util-linux) not found")
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-ec", script, "sh")
	cmd.Args = append(cmd.Args, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("as nobody: %v\n%s", err, b)
	}
}

// stickyDir is a world-writable sticky directory, as /tmp is.
func stickyDir(t *testing.T) string {
	t.Helper()
	dir := publicDir(t)
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rootFile is a root-owned file of mode 0644 in a root-owned directory,
// which an attacker wants replaced, truncated or read.
type rootFile struct {
	path string
	data []byte
}

func newRootFile(t *testing.T, dir, name string) rootFile {
	t.Helper()
	f := rootFile{path: filepath.Join(dir, name), data: []byte("root's " + name + "\n")}
	if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f rootFile) check(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(f.path)
	st, serr := os.Lstat(f.path)
	if err != nil || serr != nil || !bytes.Equal(b, f.data) || !st.Mode().IsRegular() || st.Mode().Perm() != 0o644 ||
		st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("%s was touched: %q, %v, %v %v", f.path, b, st.Mode(), err, serr)
	}
}

// Symbolic links and files an unprivileged user planted in a shared
// directory never make root's leakscope write, truncate or replace files
// elsewhere, nor hand that user its reports: -o, --save and --report-dir
// are refused with one line on stderr, and with --force the planted entry
// itself is replaced by a file of root's, mode 0600.
func TestPlantedLinksAndFilesAreRefused(t *testing.T) {
	testutil.RequireBPF(t) // run --save starts a tracer once the checks pass
	capture := writeTestCapture(t, "leaky")
	leakscope, _ := buildAll(t, "leaky")
	shared := stickyDir(t)
	victims := t.TempDir() // root's, mode 0755
	if err := os.Chmod(victims, 0o755); err != nil {
		t.Fatal(err)
	}
	passwd := newRootFile(t, victims, "passwd")
	shadow := newRootFile(t, victims, "shadow")
	victimDir := filepath.Join(victims, "cron.d")
	if err := os.Mkdir(victimDir, 0o755); err != nil {
		t.Fatal(err)
	}

	asNobody(t, `cd "$1"
ln -s "$2" out.txt
ln -s "$3" leaks.capture
ln -s "$4" artifacts
mkdir sub && ln -s "$4" sub/dir && chmod 0777 sub
touch mine.txt mine.capture && chmod 0666 mine.txt mine.capture
mkdir -m 0777 theirs
ln -s "$2" theirs/report.txt`, shared, passwd.path, shadow.path, victimDir)

	cases := []struct {
		name string
		args []string
	}{
		{"-o through a link", []string{"report", "-o", filepath.Join(shared, "out.txt"), capture}},
		{"-o over another user's file", []string{"report", "-o", filepath.Join(shared, "mine.txt"), capture}},
		{"-o through a directory link", []string{"report", "-o", filepath.Join(shared, "sub", "dir", "x.txt"), capture}},
		{"--report-dir through a link", []string{"report", "--report-dir", filepath.Join(shared, "artifacts"), capture}},
		{"--report-dir of another user", []string{"report", "--report-dir", filepath.Join(shared, "theirs"), capture}},
		{"--save through a link", []string{"run", "--save", filepath.Join(shared, "leaks.capture"), "--", "true"}},
		{"--save over another user's file", []string{"run", "--save", filepath.Join(shared, "mine.capture"), "--", "true"}},
		{"run -o through a link", []string{"run", "-o", filepath.Join(shared, "out.txt"), "--", "true"}},
		{"run --report-dir through a link", []string{"run", "--report-dir", filepath.Join(shared, "artifacts"), "--", "true"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(leakscope, c.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			if code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "owned by another user") ||
				!strings.Contains(stderr.String(), "--force") {
				t.Errorf("exit %d (%v), stderr %q, want 2 and one line naming the other user's entry and --force", code, err, stderr.String())
			}
		})
	}
	passwd.check(t)
	shadow.check(t)
	if ents, _ := os.ReadDir(victimDir); len(ents) != 0 {
		t.Errorf("files appeared in %s: %v", victimDir, ents)
	}
	for _, name := range []string{"mine.txt", "mine.capture"} {
		st, err := os.Stat(filepath.Join(shared, name))
		if err != nil || st.Size() != 0 || st.Sys().(*syscall.Stat_t).Uid != 65534 {
			t.Errorf("%s, pre-created by nobody, changed: %v %v", name, st, err)
		}
	}

	// --force: the planted entry is replaced by root's file; what it
	// pointed at is untouched.
	for _, args := range [][]string{
		{"report", "--force", "-o", filepath.Join(shared, "out.txt"), capture},
		{"report", "--force", "-o", filepath.Join(shared, "mine.txt"), capture},
		{"run", "--force", "--save", filepath.Join(shared, "leaks.capture"), "--", "true"},
		{"run", "--force", "--save", filepath.Join(shared, "mine.capture"), "--", "true"},
	} {
		out := args[len(args)-2]
		if args[0] == "run" {
			out = args[3]
		}
		if b, err := exec.Command(leakscope, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, b)
		}
		st, err := os.Lstat(out)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != 0 || st.Size() == 0 {
			t.Errorf("%v: %s is %v %v, want root's regular file of mode 0600", args, out, st.Mode(), err)
		}
	}
	passwd.check(t)
	shadow.check(t)
}
