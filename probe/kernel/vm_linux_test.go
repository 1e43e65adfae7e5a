package kernel

import (
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
const arm64HostOnly = "^(TestArm64VerifierInVM|TestGeneratedSameAcrossTargets|TestObjectsSameAcrossTargets|TestResetMatchesFreshLoad)$"

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
