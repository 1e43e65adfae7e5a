//go:build linux && amd64

package probe

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// nodeZallocHeader is what Node.js's zalloc (CompressionStream::
// AllocForBrotli, called by AllocForZlib) adds to each block zlib asks
// for: max(sizeof(size_t), alignof(max_align_t)), 16 B on x86-64
// (src/node_zlib.cc).
const nodeZallocHeader = 16

// nodeZlibAsks runs script under gdb and returns, for each size zlib asked
// node's zalloc for (AllocForZlib's items × size), how many times it was
// asked: the ground truth of what each stream allocates, counted outside
// leakscope.
func nodeZlibAsks(t *testing.T, node string, args ...string) map[uint64]int {
	t.Helper()
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		testutil.SkipOrFail(t, "no gdb: it counts node's zlib allocations for the ground truth")
	}
	f, err := elf.Open(node)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		t.Fatalf("%s is %v: the breakpoint below needs a fixed load address", node, f.Type)
	}
	syms, _ := f.Symbols()
	var at uint64
	for _, s := range syms {
		if strings.Contains(s.Name, "11ZlibContext") && strings.Contains(s.Name, "12AllocForZlib") {
			at = s.Value
		}
	}
	if at == 0 {
		t.Fatalf("%s: no CompressionStream<ZlibContext>::AllocForZlib in .symtab", node)
	}
	script := filepath.Join(t.TempDir(), "asks.gdb")
	body := fmt.Sprintf("set pagination off\nbreak *%#x\ncommands\nsilent\nprintf \"ASK %%u\\n\", $rsi*$rdx\ncontinue\nend\nrun\n", at)
	if err := os.WriteFile(script, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gdb, append([]string{"-q", "-batch", "-x", script, "--args", node}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	asks := map[uint64]int{}
	for _, m := range regexp.MustCompile(`(?m)^ASK (\d+)$`).FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		asks[n]++
	}
	if len(asks) == 0 {
		t.Fatalf("gdb saw no AllocForZlib call:\n%s", out)
	}
	return asks
}

// Node.js's zlib is built into the node binary (with its own zalloc, and
// Chromium's zlib, whose window is 16 B bigger): 100 streams of
// zlib.createInflate() written to and never ended are one row, holding
// each stream's state and window, exactly the bytes node's zalloc
// mallocs for them; the 20 streams closed hold nothing, and no malloc row
// holds a window.
func TestNodeZlibStreamsOneRow(t *testing.T) {
	testutil.RequireBPF(t)
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.SkipOrFail(t, "no node (Debian's nodejs)")
	}
	script := filepath.Join("..", "examples", "node", "zinflate.js")
	const leaked, closed = 100, 20
	// What each inflate stream asks for: the sizes asked once per stream
	// (the script's deflateSync asks others, once each).
	var perStream uint64
	var blocks []uint64
	for size, n := range nodeZlibAsks(t, node, script, itoa(leaked), itoa(closed)) {
		if n == leaked+closed {
			perStream += size + nodeZallocHeader
			blocks = append(blocks, size+nodeZallocHeader)
		}
	}
	if len(blocks) != 2 {
		t.Fatalf("each inflate stream asked for %v, want 2 blocks (state and window)", blocks)
	}
	c, _ := launch(t, node, script, itoa(leaked), itoa(closed))
	checkNoLoss(t, c)
	var rows []analyze.Site
	for _, s := range c.Sites {
		if s.Kind == analyze.KindZlibInflate && s.LiveCount > 0 {
			t.Logf("%s: %d live, %d B: %v", s.Kind, s.LiveCount, s.LiveBytes, functions(s)[:min(8, len(s.Stack.Frames))])
			rows = append(rows, s)
		}
		if s.Kind == analyze.KindMalloc {
			for _, a := range s.Live {
				for _, b := range blocks {
					if a.Size == b {
						t.Errorf("malloc row %v holds a %d B block, a stream's", functions(s), a.Size)
					}
				}
			}
		}
	}
	if len(rows) != 1 {
		t.Fatalf("%d inflate rows hold streams, want 1", len(rows))
	}
	if r := rows[0]; r.LiveCount != leaked || r.LiveBytes != leaked*perStream {
		t.Errorf("inflate row: %d streams, %d B; want %d, %d (%v B each, from node's zalloc)", r.LiveCount, r.LiveBytes, leaked, leaked*perStream, blocks)
	}
	// node initialises zlib on a worker: the row's culprit is node's.
	ranked := false
	for _, l := range analyze.Rank(c, analyze.Options{}).Leaks {
		if l.Site.ID != rows[0].ID {
			continue
		}
		ranked = true
		if l.Culprit == nil || !strings.Contains(l.Culprit.Function, "ZlibContext::InitZlib") {
			t.Errorf("culprit %+v, want ZlibContext::InitZlib", l.Culprit)
		}
	}
	if !ranked {
		t.Error("the inflate row is not among the leaks")
	}
}
