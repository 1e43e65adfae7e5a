package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/leakscope/leakscope/internal/testutil"
)

const nobody = 65534

// sharedDir makes a sticky, world-writable directory like /tmp.
func sharedDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.SkipOrFail(t, "needs root: the entries of another user are made with lchown")
	}
	d := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(d, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o1777); err != nil {
		t.Fatal(err)
	}
	return d
}

// victim is a root-owned file that must stay untouched.
func victim(t *testing.T) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "victim")
	if err := os.WriteFile(p, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, func() {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil || string(b) != "precious\n" {
			t.Errorf("victim %s changed: %q, %v", p, b, err)
		}
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("victim %s mode changed: %v, %v", p, st.Mode(), err)
		}
	}
}

func plantLink(t *testing.T, target, link string, uid int) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func TestWriteFileRefusesAnotherUsersLink(t *testing.T) {
	shared := sharedDir(t)
	v, check := victim(t)
	out := filepath.Join(shared, "report.txt")
	plantLink(t, v, out, nobody)

	for name, write := range map[string]func() error{
		"WriteFile": func() error { return WriteFile(out, []byte("report"), Options{}) },
		"Create": func() error {
			f, err := Create(out, Options{})
			if err == nil {
				f.Close()
			}
			return err
		},
		"Check": func() error { return Check(out, Options{}) },
	} {
		err := write()
		if !errors.Is(err, ErrOtherUser) {
			t.Errorf("%s through nobody's link: %v, want ErrOtherUser", name, err)
		}
	}
	check()
	if st, err := os.Lstat(out); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced without --force: %v", err)
	}

	// --force replaces the link itself; the file it pointed at stays.
	if err := WriteFile(out, []byte("report"), Options{Force: true}); err != nil {
		t.Fatal(err)
	}
	check()
	st, err := os.Lstat(out)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("--force: %v %v, want a regular root file of mode 0600", st.Mode(), err)
	}
}

func TestDirectoryLinkOfAnotherUserIsNotFollowed(t *testing.T) {
	shared := sharedDir(t)
	victimDir := t.TempDir()
	plantLink(t, victimDir, filepath.Join(shared, "artifacts"), nobody)

	if err := WriteFile(filepath.Join(shared, "artifacts", "report.txt"), []byte("x"), Options{}); !errors.Is(err, ErrOtherUser) {
		t.Errorf("WriteFile through a directory link of nobody: %v", err)
	}
	if d, err := MkdirAll(filepath.Join(shared, "artifacts", "sub"), Options{}); !errors.Is(err, ErrOtherUser) {
		t.Errorf("MkdirAll through a directory link of nobody: %v", err)
		if d != nil {
			d.Close()
		}
	}
	if ents, _ := os.ReadDir(victimDir); len(ents) != 0 {
		t.Errorf("files appeared in the victim directory: %v", ents)
	}
}

func TestPrecreatedFileOfAnotherUser(t *testing.T) {
	shared := sharedDir(t)
	out := filepath.Join(shared, "leaks.capture")
	if err := os.WriteFile(out, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(out, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	// The attacker keeps it open to read what root writes.
	held, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	if _, err := Create(out, Options{}); !errors.Is(err, ErrOtherUser) {
		t.Fatalf("Create over nobody's file: %v", err)
	}
	f, err := Create(out, Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("secret capture"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _ := os.ReadFile(out)
	if string(got) != "secret capture" {
		t.Errorf("read back %q", got)
	}
	st, _ := os.Stat(out)
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("owner %d mode %v, want root's 0600", uid, st.Mode())
	}
	leaked, _ := os.ReadFile("/proc/self/fd/" + itoa(int(held.Fd())))
	if len(leaked) != 0 {
		t.Errorf("the attacker's open file received %q", leaked)
	}
}

func TestHardLinkIsReplacedNotWritten(t *testing.T) {
	shared := sharedDir(t)
	v, check := victim(t)
	out := filepath.Join(shared, "out")
	if err := os.Link(v, out); err != nil {
		testutil.SkipOrFail(t, "hard link across directories: "+err.Error())
	}
	if err := WriteFile(out, []byte("report"), Options{}); err != nil {
		t.Fatal(err)
	}
	f, err := Create(out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	check()
}

func TestTrustedLinksAreFollowed(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(dir, "latest")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real/report.txt", filepath.Join(dir, "report")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "latest", "a.txt"), []byte("a"), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "report"), []byte("r"), Options{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.txt": "a", "report.txt": "r"} {
		if b, err := os.ReadFile(filepath.Join(real, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if st, err := os.Lstat(filepath.Join(dir, "report")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link itself was replaced: %v", err)
	}
	// Relative paths, "..", and a loop.
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(real); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile("../latest/./b.txt", []byte("b"), Options{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(real, "b.txt")); string(b) != "b" {
		t.Errorf("relative write: %q", b)
	}
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink("loop", loop); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(loop, nil, Options{}); !errors.Is(err, unix.ELOOP) {
		t.Errorf("loop: %v", err)
	}
	if err := WriteFile(filepath.Join(loop, "x"), nil, Options{}); !errors.Is(err, unix.ELOOP) {
		t.Errorf("loop as a directory: %v", err)
	}
}

func TestSpecialFiles(t *testing.T) {
	if err := WriteFile("/dev/null", []byte("x"), Options{}); err != nil {
		t.Errorf("/dev/null: %v", err)
	}
	if st, err := os.Stat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v", err)
	}
	// /dev/stdout leads through /proc/self/fd/1 to this test's output.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	path := "/proc/self/fd/" + itoa(int(w.Fd()))
	if err := WriteFile(path, []byte("through a pipe"), Options{}); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	w.Close()
	buf := make([]byte, 64)
	n, _ := r.Read(buf)
	if string(buf[:n]) != "through a pipe" {
		t.Errorf("pipe got %q", buf[:n])
	}

	// A FIFO with no reader is an error at once, not a hang.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(fifo, []byte("x"), Options{}); err == nil || !strings.Contains(err.Error(), "no reader") {
		t.Errorf("FIFO with no reader: %v", err)
	}
	if err := Check(fifo, Options{}); err != nil {
		t.Errorf("Check of a writable FIFO: %v", err)
	}
	if err := WriteFile(filepath.Dir(fifo), nil, Options{}); err == nil {
		t.Error("writing a directory's path succeeded")
	}
}

func TestMkdirAllAndDirWrites(t *testing.T) {
	base := t.TempDir()
	d, err := MkdirAll(filepath.Join(base, "a", "b"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range []string{"report.txt", "junit.xml"} {
		if err := d.WriteFile(name, []byte(name), Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.WriteFile("../escape", nil, Options{}); err == nil {
		t.Error("a name with a slash was written")
	}
	st, err := os.Stat(filepath.Join(base, "a", "b"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("mode %v %v, want 0700", st.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(base, "a", "b", "junit.xml")); string(b) != "junit.xml" {
		t.Errorf("junit.xml: %q", b)
	}
	ents, _ := os.ReadDir(filepath.Join(base, "a", "b"))
	if len(ents) != 2 {
		t.Errorf("entries %v, want the two files and no temporary ones", ents)
	}
}

func TestDirOfAnotherUser(t *testing.T) {
	shared := sharedDir(t)
	pre := filepath.Join(shared, "artifacts")
	if err := os.Mkdir(pre, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pre, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if _, err := MkdirAll(pre, Options{}); !errors.Is(err, ErrOtherUser) {
		t.Errorf("MkdirAll of nobody's directory: %v", err)
	}
	v, check := victim(t)
	plantLink(t, v, filepath.Join(pre, "report.txt"), nobody)
	d, err := MkdirAll(pre, Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteFile("report.txt", []byte("x"), Options{}); !errors.Is(err, ErrOtherUser) {
		t.Errorf("a planted link inside the directory: %v", err)
	}
	check()
}

func itoa(n int) string { return strconv.Itoa(n) }
