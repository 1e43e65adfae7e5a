//go:build linux && amd64

package target

import (
	"fmt"
	"testing"

	"github.com/leakscope/leakscope/probe/jvm"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
)

func TestSplitRange(t *testing.T) {
	rs := []kernel.Range{{Start: 0x1000, End: 0x2000, Flags: 1}, {Start: 0x3000, End: 0x9000, Flags: 0}}
	got := splitRange(rs, 0x4000, 0x5000, 16)
	want := []kernel.Range{{Start: 0x1000, End: 0x2000, Flags: 1}, {Start: 0x3000, End: 0x4000}, {Start: 0x4000, End: 0x5000, Flags: 16}, {Start: 0x5000, End: 0x9000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("split inside:\n got %v\nwant %v", got, want)
	}
	if got := splitRange(rs, 0x3000, 0x9000, 16); fmt.Sprint(got) != fmt.Sprint([]kernel.Range{rs[0], {Start: 0x3000, End: 0x9000, Flags: 16}}) {
		t.Errorf("whole range: %v", got)
	}
	if got := splitRange(rs, 0x1800, 0x3800, 16); fmt.Sprint(got) != fmt.Sprint(rs) {
		t.Errorf("straddling two ranges must change nothing: %v", got)
	}
}

// A JVM's code cache is walked by its code blobs' frame sizes
// (RANGE_JVM_CODE), unless the JVM keeps frame pointers in compiled code
// (-XX:+PreserveFramePointer): then by them, as other anonymous code. The
// interpreter is its own range either way.
func TestJVMCodeRanges(t *testing.T) {
	for _, fp := range []bool{false, true} {
		v := New(0, nil)
		v.current = []procfs.Mapping{{Start: 0x10000, End: 0x20000, Perms: "r-xp"}}
		v.SetJVMCode(jvm.Code{Cache: [2]uint64{0x10000, 0x20000}, Interpreter: [2]uint64{0x11000, 0x12000}, FramePointers: fp})
		code := kernel.RangeHasFP
		if !fp {
			code |= kernel.RangeJVMCode
		}
		want := []kernel.Range{
			{Start: 0x10000, End: 0x11000, Flags: code},
			{Start: 0x11000, End: 0x12000, Flags: kernel.RangeJVMInterp | kernel.RangeHasFP},
			{Start: 0x12000, End: 0x20000, Flags: code},
		}
		if got := v.Ranges(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("frame pointers %v:\n got %v\nwant %v", fp, got, want)
		}
	}
}
