// Package vmtest boots a pinned Debian 12 kernel (6.1) under qemu for a
// test: it fetches nothing, but finds the kernel image that
// ebpf/include/fetch-kernel.sh cached (make deps runs it), builds the
// guest's programs with the Go toolchain (CGO_ENABLED=0: the initramfs
// has no libc), writes an initramfs (newc) with internal/vminit as /init,
// boots it under qemu's emulation (TCG: no KVM is assumed), logs the
// guest's console to the test's log line by line and parses what vminit
// and go test print there.
//
// A Machine is one boot:
//
//	m := vmtest.New(t, "amd64") // skips without qemu, the image, or in -short mode
//	m.Build("test", "-c", "-o", m.Path("kernel.test"), ".")
//	run := m.Boot([]string{"/kernel.test -test.v"}, 5*time.Minute)
//	run.Check(t)
package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// arch is how one architecture's pinned kernel is booted.
type arch struct {
	qemu    string   // the emulator's command
	pkg     string   // the Debian package that has it
	args    []string // machine, CPU and console arguments before -kernel
	console string   // the kernel's console device
}

// arches are the architectures, by GOARCH, that fetch-kernel.sh pins a
// kernel for. 2 CPUs: one makes the verifier's tests 60% slower, and
// some BPF tests need two.
var arches = map[string]arch{
	"arm64": {"qemu-system-aarch64", "qemu-system-arm",
		[]string{"-M", "virt", "-cpu", "cortex-a57"}, "ttyAMA0"},
	// -cpu max: every x86-64 feature TCG emulates; the BPF JIT needs
	// none beyond x86-64's base.
	"amd64": {"qemu-system-x86_64", "qemu-system-x86",
		[]string{"-M", "q35", "-cpu", "max"}, "ttyS0"},
}

// Machine is one guest: the files of its initramfs, built into a
// temporary directory, and the kernel it boots.
type Machine struct {
	t      *testing.T
	goarch string
	arch   arch
	qemu   string // the emulator's path
	image  string // the kernel image's path
	dir    string
	files  map[string]string // name in the initramfs → path on the host
}

// New returns a machine for goarch (arm64 or amd64). It skips t
// (SkipOrFail: fails under LEAKSCOPE_REQUIRE_BPF=1) in -short mode and
// when qemu or the pinned kernel image is not installed, naming what to
// install.
func New(t *testing.T, goarch string) *Machine {
	t.Helper()
	a, ok := arches[goarch]
	if !ok {
		t.Fatalf("vmtest: no pinned kernel for %s", goarch)
	}
	if testing.Short() {
		testutil.SkipOrFail(t, "boots an "+goarch+" kernel under qemu for minutes: skipped in -short mode")
	}
	qemu, err := exec.LookPath(a.qemu)
	if err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("needs %s (Debian's %s; make deps installs it)", a.qemu, a.pkg))
	}
	image, err := kernel(goarch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(image); err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("needs the %s kernel image at %s (make deps, or sh ebpf/include/fetch-kernel.sh %s)", goarch, image, goarch))
	}
	return &Machine{t: t, goarch: goarch, arch: a, qemu: qemu, image: image, dir: t.TempDir(), files: map[string]string{}}
}

// kernel is where fetch-kernel.sh caches the pinned kernel image of
// goarch, whether or not it is there.
func kernel(goarch string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find the module's root: %w", err)
	}
	script := filepath.Join(strings.TrimSpace(string(root)), "ebpf", "include", "fetch-kernel.sh")
	out, err := exec.Command("sh", script, goarch, "--path").Output()
	if err != nil {
		return "", fmt.Errorf("sh %s %s --path: %w", script, goarch, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Path is name's path in the machine's build directory.
func (m *Machine) Path(name string) string {
	return filepath.Join(m.dir, name)
}

// Build runs the go command with args for the guest (GOOS=linux, the
// machine's GOARCH, CGO_ENABLED=0).
func (m *Machine) Build(args ...string) {
	m.t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+m.goarch, "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		m.t.Fatalf("GOARCH=%s go %s: %v\n%s", m.goarch, strings.Join(args, " "), err, msg)
	}
}

// Add puts the host's file at path into the initramfs as /name, an
// executable.
func (m *Machine) Add(name, path string) {
	m.files[name] = path
}

// Command is how one command of the guest ended.
type Command struct {
	Name   string // its program
	Status int    // its exit status
	Took   time.Duration
}

// Run is what the guest's console said.
type Run struct {
	Booted  time.Duration   // qemu's start to vminit's first line: the kernel's boot
	Elapsed time.Duration   // qemu's start to its exit
	Ran     []Command       // the commands vminit ran, in order
	Done    *int            // vminit's done status
	Passed  map[string]bool // go tests (and subtests) passed
	Failed  []string
	Skipped []string
	Files   map[string][]byte // the files vminit printed (cat), by path
	Err     error             // qemu's
}

var (
	vminitExit = regexp.MustCompile(`^vminit: exit (\S+) (-?\d+) after ([0-9.]+) s`)
	vminitDone = regexp.MustCompile(`^vminit: done (-?\d+)`)
	vminitFile = regexp.MustCompile(`^vminit: file (\S+) \d+ bytes`)
	vminitEnd  = regexp.MustCompile(`^vminit: end (\S+)`)
	goTestLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
	// escapes are the terminal's control sequences the firmware writes
	// (x86's SeaBIOS clears the screen before the kernel's first line).
	escapes = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|[A-Za-z])`)
)

// Boot builds internal/vminit for the guest, writes the initramfs of the
// added files, vminit as /init and commands as /commands, boots the
// kernel with 1 GiB and 2 CPUs, and returns what its console said, once
// vminit has powered it off or timeout has passed (a fatal error then).
func (m *Machine) Boot(commands []string, timeout time.Duration) *Run {
	t := m.t
	t.Helper()
	m.Build("build", "-o", m.Path("init"), "github.com/leakscope/leakscope/internal/vminit")
	files := map[string]string{"init": m.Path("init")}
	for name, path := range m.files {
		files[name] = path
	}
	initrd := m.Path("initrd")
	if err := writeInitramfs(initrd, files, map[string]string{"commands": strings.Join(commands, "\n") + "\n"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append(append([]string{}, m.arch.args...), "-m", "1024", "-smp", "2",
		"-nographic", "-nic", "none", "-no-reboot",
		"-kernel", m.image, "-initrd", initrd, "-append", "console="+m.arch.console+" panic=-1 quiet")
	cmd := exec.CommandContext(ctx, m.qemu, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := readConsole(t, out, start)
	r.Err = cmd.Wait()
	r.Elapsed = time.Since(start)
	t.Logf("qemu exited after %.1f s: %v; vminit started after %.1f s", r.Elapsed.Seconds(), r.Err, r.Booted.Seconds())
	if stderr.Len() > 0 {
		t.Logf("qemu's stderr:\n%s", stderr.Bytes())
	}
	if ctx.Err() != nil {
		t.Fatalf("the %s guest did not finish within %v", m.goarch, timeout)
	}
	if r.Done == nil {
		t.Fatal("the guest stopped without vminit's done line")
	}
	return r
}

// Check fails t unless vminit and every command it ran ended with 0 and
// no go test failed or skipped (the guest sets LEAKSCOPE_REQUIRE_BPF=1,
// so a skip there is a prerequisite the guest lacks), and each of
// mustPass passed.
func (r *Run) Check(t *testing.T, mustPass ...string) {
	t.Helper()
	if *r.Done != 0 {
		t.Errorf("the guest's vminit ended with status %d", *r.Done)
	}
	if len(r.Ran) == 0 {
		t.Fatal("the guest ran no command")
	}
	for _, c := range r.Ran {
		if c.Status != 0 {
			t.Errorf("%s exited %d in the guest", c.Name, c.Status)
		}
	}
	for _, name := range r.Failed {
		t.Errorf("%s failed in the guest", name)
	}
	for _, name := range r.Skipped {
		t.Errorf("%s skipped in the guest", name)
	}
	for _, name := range mustPass {
		if !r.Passed[name] {
			t.Errorf("%s did not pass in the guest", name)
		}
	}
	t.Logf("guest: %d tests passed (with subtests), %d failed, %d skipped", len(r.Passed), len(r.Failed), len(r.Skipped))
}

// readConsole logs the guest's console line by line, but for the files
// vminit prints, and parses vminit's and go test's lines.
func readConsole(t *testing.T, out io.Reader, start time.Time) *Run {
	r := &Run{Passed: map[string]bool{}, Files: map[string][]byte{}}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var file string // the file being printed
	var b64 strings.Builder
	for sc.Scan() {
		line := escapes.ReplaceAllString(strings.TrimRight(sc.Text(), "\r"), "")
		if file != "" {
			if m := vminitEnd.FindStringSubmatch(line); m != nil && m[1] == file {
				data, err := base64.StdEncoding.DecodeString(b64.String())
				if err != nil {
					t.Errorf("guest file %s: %v", file, err)
				}
				r.Files[file] = data
				t.Logf("%s (%d bytes decoded)", line, len(data))
				file = ""
			} else {
				b64.WriteString(line)
			}
			continue
		}
		if r.Booted == 0 && strings.HasPrefix(line, "vminit: ") {
			r.Booted = time.Since(start)
		}
		t.Log(line)
		if m := vminitExit.FindStringSubmatch(line); m != nil {
			status, _ := strconv.Atoi(m[2])
			secs, _ := strconv.ParseFloat(m[3], 64)
			r.Ran = append(r.Ran, Command{m[1], status, time.Duration(secs * float64(time.Second))})
		} else if m := vminitDone.FindStringSubmatch(line); m != nil {
			status, _ := strconv.Atoi(m[1])
			r.Done = &status
		} else if m := vminitFile.FindStringSubmatch(line); m != nil {
			file = m[1]
			b64.Reset()
		} else if m := goTestLine.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "PASS":
				r.Passed[m[2]] = true
			case "FAIL":
				r.Failed = append(r.Failed, m[2])
			case "SKIP":
				r.Skipped = append(r.Skipped, m[2])
			}
		}
	}
	return r
}

// writeInitramfs writes an initramfs to path: a cpio archive in the
// kernel's "newc" format (Documentation/driver-api/early-userspace/
// buffer-format.rst) holding each of files (name in the archive → file
// on the host) as an executable, each of texts as a plain file, and
// /dev/console, which the kernel opens for /init's standard streams.
func writeInitramfs(path string, files, texts map[string]string) error {
	var b bytes.Buffer
	ino := uint32(1)
	entry := func(name string, mode, rdevMajor, rdevMinor uint32, data []byte) {
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
		ino++
		b.WriteString(name)
		b.WriteByte(0)
		pad4(&b)
		b.Write(data)
		pad4(&b)
	}
	entry("dev", 0o040755, 0, 0, nil)
	entry("dev/console", 0o020600, 5, 1, nil)
	for name, host := range files {
		data, err := os.ReadFile(host)
		if err != nil {
			return err
		}
		entry(name, 0o100755, 0, 0, data)
	}
	for name, text := range texts {
		entry(name, 0o100644, 0, 0, []byte(text))
	}
	ino = 0
	entry("TRAILER!!!", 0, 0, 0, nil)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// pad4 pads b to a multiple of 4 bytes, as newc aligns every header and
// every file's data.
func pad4(b *bytes.Buffer) {
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
}
