package kernel

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/testutil"
)

// arm64HostOnly are the tests of this package the arm64 guest does not
// run: this one, those that read the package's sources, and
// TestResetMatchesFreshLoad, whose maps' semantics are the host's (52 s
// under emulation for no load the budget test does not make). Every other
// test runs there, all that load the collection or the harness object
// among them (TestProgramsVerifyWithinBudget, the Load and Reset tests,
// the BPF_PROG_TEST_RUN harness tests); those whose expectations are
// x86-64's frame layouts are not built for arm64
// (walk_linux_amd64_test.go).
const arm64HostOnly = "^(TestArm64VerifierInVM|TestGeneratedSameAcrossTargets|TestObjectsSameAcrossTargets|TestResetMatchesFreshLoad)$"

// arm64MustPass are tests the guest must have passed, whatever else ran:
// the verifier's, Load's and one harness test per kind of helper.
var arm64MustPass = []string{"TestProgramsVerifyWithinBudget", "TestWalkersLoadWhenNeeded",
	"TestLazyReturnsLoadWhenAttached", "TestSpecLayout",
	"TestCookiesDecodeAsKernel", "TestSiteArgRegisters", "TestWalkStackChunkGrowth",
	"TestWalkStackCompiledJavaFrames", "TestTrackAllocRelease", "TestZwindowOwner"}

// arm64VMTimeout bounds the guest's run: boot ~2 s, the tests a few
// minutes under qemu's emulation (TCG) on 2 virtual CPUs (one makes the
// verifier's test 60% slower, and TestSiteCountsAcrossCPUs needs two).
const arm64VMTimeout = 15 * time.Minute

var (
	vminitExit = regexp.MustCompile(`^vminit: exit (\S+) (-?\d+) after`)
	vminitDone = regexp.MustCompile(`^vminit: done (-?\d+)`)
	goTestLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
)

// TestArm64VerifierInVM loads the arm64 objects into a real arm64 kernel:
// it cross-compiles this package's tests for linux/arm64, boots the
// pinned Debian 12 arm64 kernel (6.1; ebpf/include/arm64/fetch-kernel.sh,
// which make deps runs) under qemu-system-aarch64 with an initramfs of
// those tests and internal/vminit as /init, and fails unless every test
// run there passed, arm64MustPass among them (none skipped: the guest
// sets LEAKSCOPE_REQUIRE_BPF=1). The guest's console is this test's log.
func TestArm64VerifierInVM(t *testing.T) {
	if testing.Short() {
		testutil.SkipOrFail(t, "boots an arm64 kernel under qemu for minutes: skipped in -short mode")
	}
	qemu, err := exec.LookPath("qemu-system-aarch64")
	if err != nil {
		testutil.SkipOrFail(t, "needs qemu-system-aarch64 (Debian's qemu-system-arm; make deps installs it)")
	}
	image := arm64Kernel(t)

	dir := t.TempDir()
	arm64 := append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	goBuild(t, arm64, "test", "-c", "-o", filepath.Join(dir, "kernel.test"), ".")
	goBuild(t, arm64, "build", "-o", filepath.Join(dir, "init"), "../../internal/vminit")
	commands := "/kernel.test -test.v -test.count=1 -test.timeout=" + (arm64VMTimeout - time.Minute).String() +
		" -test.skip " + arm64HostOnly + "\n"
	initrd := filepath.Join(dir, "initrd")
	if err := writeInitramfs(initrd, map[string]string{
		"init":        filepath.Join(dir, "init"),
		"kernel.test": filepath.Join(dir, "kernel.test"),
	}, map[string]string{"commands": commands}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), arm64VMTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-M", "virt", "-cpu", "cortex-a57", "-m", "1024", "-smp", "2",
		"-nographic", "-nic", "none", "-no-reboot",
		"-kernel", image, "-initrd", initrd, "-append", "console=ttyAMA0 panic=-1 quiet")
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
	g := readGuest(t, out, start)
	werr := cmd.Wait()
	t.Logf("qemu exited after %.1f s: %v; vminit started after %.1f s", time.Since(start).Seconds(), werr, g.booted.Seconds())
	if stderr.Len() > 0 {
		t.Logf("qemu's stderr:\n%s", stderr.Bytes())
	}
	if ctx.Err() != nil {
		t.Fatalf("the guest did not finish within %v", arm64VMTimeout)
	}
	if g.done == nil {
		t.Fatal("the guest stopped without vminit's done line")
	}
	if *g.done != 0 {
		t.Errorf("the guest's vminit ended with status %d", *g.done)
	}
	if len(g.exits) == 0 {
		t.Fatal("the guest ran no test binary")
	}
	for name, status := range g.exits {
		if status != 0 {
			t.Errorf("%s exited %d in the guest", name, status)
		}
	}
	for _, name := range g.failed {
		t.Errorf("%s failed on the arm64 kernel", name)
	}
	for _, name := range g.skipped {
		t.Errorf("%s skipped on the arm64 kernel", name)
	}
	for _, name := range arm64MustPass {
		if !g.passed[name] {
			t.Errorf("%s did not pass on the arm64 kernel", name)
		}
	}
	t.Logf("arm64 guest: %d tests passed (with subtests), %d failed, %d skipped", len(g.passed), len(g.failed), len(g.skipped))
}

// guestRun is what the guest's console said.
type guestRun struct {
	booted  time.Duration  // qemu's start to vminit's first line: the kernel's boot
	exits   map[string]int // each command's exit status
	done    *int           // vminit's done status
	passed  map[string]bool
	failed  []string
	skipped []string
}

// readGuest logs the guest's console line by line and parses vminit's and
// go test's lines.
func readGuest(t *testing.T, out io.Reader, start time.Time) *guestRun {
	g := &guestRun{exits: map[string]int{}, passed: map[string]bool{}}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if g.booted == 0 && strings.HasPrefix(line, "vminit: ") {
			g.booted = time.Since(start)
		}
		t.Log(line)
		if m := vminitExit.FindStringSubmatch(line); m != nil {
			var status int
			fmt.Sscan(m[2], &status)
			g.exits[filepath.Base(m[1])] = status
		} else if m := vminitDone.FindStringSubmatch(line); m != nil {
			var status int
			fmt.Sscan(m[1], &status)
			g.done = &status
		} else if m := goTestLine.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "PASS":
				g.passed[m[2]] = true
			case "FAIL":
				g.failed = append(g.failed, m[2])
			case "SKIP":
				g.skipped = append(g.skipped, m[2])
			}
		}
	}
	return g
}

// arm64Kernel is the path of the pinned arm64 kernel Image, which
// fetch-kernel.sh fetched into its cache; the test skips (fails under
// LEAKSCOPE_REQUIRE_BPF=1) when it is not there.
func arm64Kernel(t *testing.T) string {
	t.Helper()
	script := "../../ebpf/include/arm64/fetch-kernel.sh"
	out, err := exec.Command("sh", script, "--path").Output()
	if err != nil {
		t.Fatalf("sh %s --path: %v", script, err)
	}
	image := strings.TrimSpace(string(out))
	if _, err := os.Stat(image); err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("needs the arm64 kernel Image at %s (make deps, or sh ebpf/include/arm64/fetch-kernel.sh)", image))
	}
	return image
}

// goBuild runs the go command with args and env.
func goBuild(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = env
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=arm64 go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
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
