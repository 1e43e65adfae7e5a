//go:build linux && amd64

package probe

import (
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// A library loaded with dlopen and used at once is probed before its
// first call: the dynamic linker's _dl_debug_state stops the launched
// command until the mappings are reread. With malloc traced or not (no
// malloc probe then to notice the new code), the counts of
// examples/c/dlopenzlib.c are exact and no snapshot is needed.
func TestDlopenedLibraryProbedBeforeFirstCall(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildC(t, "dlopenzlib", "-ldl")
	for _, malloc := range []string{MallocOff, MallocOn} {
		t.Run("malloc="+malloc, func(t *testing.T) {
			tr, stderr := launchWait(t, Options{Malloc: malloc}, bin, "--leaked", "7", "--closed", "4")
			c, err := tr.Stop()
			if err != nil {
				t.Fatal(err)
			}
			checkNoLoss(t, c)
			got := map[string][2]uint64{}
			for _, s := range c.Sites {
				if s.Kind == analyze.KindZlibInflate {
					fns := functions(s)
					v := got[fns[0]]
					got[fns[0]] = [2]uint64{v[0] + s.LiveCount, v[1] + s.Allocs}
				}
			}
			if got["open_leaky"] != [2]uint64{7, 7} || got["open_closed"] != [2]uint64{0, 4} || len(got) != 2 {
				t.Errorf("inflate rows by first frame (live, inits) = %v; want open_leaky 7 7, open_closed 0 4\n%s", got, stderr)
			}
		})
	}
}
