//go:build linux && amd64

package target

import (
	"fmt"
	"testing"

	"github.com/leakscope/leakscope/probe/kernel"
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
