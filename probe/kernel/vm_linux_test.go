package kernel

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/leakscope/leakscope/internal/vmtest"
)

// arm64HostOnly are the tests of this package the arm64 guest does not
// run: the guests' tests, those that read the package's sources, and
// TestResetMatchesFreshLoad, whose maps' semantics are the host's (52 s
// under emulation for no load the budget test does not make). Every other
// test runs there, all that load the collection or the harness object
// among them (TestProgramsVerifyWithinBudget, the Load and Reset tests,
// the BPF_PROG_TEST_RUN harness tests); those whose expectations are
// x86-64's frame layouts are not built for arm64
// (walk_linux_amd64_test.go).
const arm64HostOnly = "^(TestArm64VerifierInVM|TestAmd64KernelInVM|TestGeneratedSameAcrossTargets|TestObjectsSameAcrossTargets|TestResetMatchesFreshLoad)$"

// arm64MustPass are tests the guest must have passed, whatever else ran:
// the verifier's, Load's and one harness test per kind of helper.
var arm64MustPass = []string{"TestProgramsVerifyWithinBudget", "TestWalkersLoadWhenNeeded",
	"TestLazyReturnsLoadWhenAttached", "TestSpecLayout",
	"TestCookiesDecodeAsKernel", "TestSiteArgRegisters", "TestWalkStackChunkGrowth",
	"TestWalkStackCompiledJavaFrames", "TestTrackAllocRelease", "TestZwindowOwner"}

// arm64VMTimeout bounds the arm64 guest's run: boot ~2 s, the tests a few
// minutes under qemu's emulation (TCG).
const arm64VMTimeout = 15 * time.Minute

// TestArm64VerifierInVM loads the arm64 objects into a real arm64 kernel:
// it cross-compiles this package's tests for linux/arm64, boots the
// pinned Debian 12 arm64 kernel (6.1; ebpf/include/fetch-kernel.sh,
// which make deps runs) under qemu-system-aarch64 (internal/vmtest), and
// fails unless every test run there passed, arm64MustPass among them
// (none skipped: the guest sets LEAKSCOPE_REQUIRE_BPF=1). The guest's
// console is this test's log.
func TestArm64VerifierInVM(t *testing.T) {
	m := vmtest.New(t, "arm64")
	m.Build("test", "-c", "-o", m.Path("kernel.test"), ".")
	m.Add("kernel.test", m.Path("kernel.test"))
	run := m.Boot([]string{"/kernel.test -test.v -test.count=1 -test.timeout=" + (arm64VMTimeout - time.Minute).String() +
		" -test.skip " + arm64HostOnly}, arm64VMTimeout)
	run.Check(t, arm64MustPass...)
}

// amd64Guest are the runs of this package's tests in the x86-64 guest:
// every program of the object through the verifier under the settings of
// run and attach, the commands' defaults (TestProgramsVerifyWithinBudget;
// each of its 8 configurations takes 20-27 s there, all 8 ~160 s), and
// the loader with its fallbacks for what 6.1 lacks (Load, Prepare, the
// lazily loaded return programs).
var amd64Guest = []string{
	"-test.run ^TestProgramsVerifyWithinBudget$/^(run|attach)$",
	"-test.run ^(TestWalkersLoadWhenNeeded|TestLazyReturnsLoadWhenAttached|TestSpecLayout)$",
}

// amd64VMTimeout bounds the x86-64 guest's run, a hang guard.
const amd64VMTimeout = 10 * time.Minute

// TestAmd64KernelInVM runs leakscope on Debian 12's own amd64 kernel (6.1,
// pinned by ebpf/include/fetch-kernel.sh) under qemu-system-x86_64
// (internal/vmtest): this package's tests of amd64Guest, leakscope doctor
// (which exits 2 when a host check fails), then a real trace: the static
// leakscope binary runs the static leaky example (examples/c/leaky.c),
// and its JSON report must hold leaky's ground truth exactly
// (examples/README.md) and lose nothing. ~50 s on an idle 2-core host,
// ~80 s on a busy one: boot 6 s, the budget 29 s, the Load tests 3 s,
// doctor 2 s, the trace 8 s.
func TestAmd64KernelInVM(t *testing.T) {
	m := vmtest.New(t, "amd64")
	m.Build("test", "-c", "-o", m.Path("kernel.test"), ".")
	m.Add("kernel.test", m.Path("kernel.test"))
	m.Build("build", "-o", m.Path("leakscope"), "github.com/leakscope/leakscope/cmd/leakscope")
	m.Add("leakscope", m.Path("leakscope"))
	src := filepath.Join("..", "..", "examples", "c", "leaky.c")
	if b, err := exec.Command("gcc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", "-static", "-o", m.Path("leaky"), src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static: %v\n%s", err, b)
	}
	m.Add("leaky", m.Path("leaky"))
	var commands []string
	for _, args := range amd64Guest {
		commands = append(commands, "/kernel.test -test.v -test.count=1 -test.timeout="+(amd64VMTimeout-time.Minute).String()+" "+args)
	}
	commands = append(commands, "/leakscope doctor",
		"/leakscope run --progress never --format json -o /tmp/r.json -- /leaky", "cat /tmp/r.json")
	run := m.Boot(commands, amd64VMTimeout)
	for _, c := range run.Ran {
		t.Logf("%s exited %d after %.1f s in the guest", c.Name, c.Status, c.Took.Seconds())
	}
	run.Check(t, "TestProgramsVerifyWithinBudget/run", "TestProgramsVerifyWithinBudget/attach",
		"TestWalkersLoadWhenNeeded", "TestLazyReturnsLoadWhenAttached", "TestSpecLayout")

	data, ok := run.Files["/tmp/r.json"]
	if !ok {
		t.Fatal("the guest printed no report")
	}
	var r struct {
		Leaks []struct {
			Kind             string `json:"kind"`
			OutstandingCount uint64 `json:"outstanding_count"`
			OutstandingBytes uint64 `json:"outstanding_bytes"`
			Frames           []struct {
				Function string `json:"function"`
			} `json:"frames"`
		} `json:"leaks"`
		Lost     map[string]uint64 `json:"lost"`
		Warnings []string          `json:"warnings"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("the guest's report: %v", err)
	}
	// As cmd/leakscope's checkLeakyReport: the two leaks exact, by their
	// leaf function, whatever else the report lists, and nothing lost.
	got := map[string][2]uint64{}
	for _, l := range r.Leaks {
		if len(l.Frames) > 0 && l.Kind == "malloc" {
			b := got[l.Frames[0].Function]
			got[l.Frames[0].Function] = [2]uint64{b[0] + l.OutstandingCount, b[1] + l.OutstandingBytes}
		}
	}
	for fn, want := range map[string][2]uint64{"leak_request_buffer": {100, 100 * 4096}, "leak_small_tag": {25, 25 * 48}} {
		if got[fn] != want {
			t.Errorf("%s: %d blocks, %d bytes outstanding; want %d, %d", fn, got[fn][0], got[fn][1], want[0], want[1])
		} else {
			t.Logf("%s: %d blocks, %d bytes outstanding, as leaky.c's ground truth", fn, got[fn][0], got[fn][1])
		}
	}
	for _, w := range r.Warnings {
		t.Logf("the report's warning: %s", w)
	}
	for what, n := range r.Lost {
		if n != 0 {
			t.Errorf("lost %s: %d", what, n)
		}
	}
}
