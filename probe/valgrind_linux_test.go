//go:build linux && amd64

package probe

import (
	"io"
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

// Debian's own programs, launched by leakscope and run under valgrind's
// memcheck (an independent count: its allocator replaces glibc's, and it
// counts every block itself): the heap blocks and bytes still in use when
// each exits are the same, block for block. --run-libc-freeres=no: glibc
// would otherwise free its own blocks for valgrind at the exit, which a
// program never does. Each program's input is fixed, and its environment
// (fixedEnv), so that both runs make the same calls.
func TestDebianProgramsMatchValgrind(t *testing.T) {
	testutil.RequireBPF(t)
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		testutil.SkipOrFail(t, "valgrind not found (apt-get install valgrind)")
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "input")
	var text strings.Builder
	for i := range 3000 {
		text.WriteString(strconv.Itoa(i*7919%3001) + " line of the input " + strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(input, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "input.tar")
	for _, argv := range [][]string{
		{"/usr/bin/sort", "-n", input},
		{"/usr/bin/gzip", "-9", "-c", input},
		{"/usr/bin/mawk", "{ n[$1]++ } END { for (k in n) c++; print c }", input},
		{"/usr/bin/sed", "-E", "s/([0-9]+) line/\\1 row/", input},
		{"/usr/bin/grep", "-c", "-E", "^[0-9]*7 ", input},
		{"/usr/bin/tar", "-cf", archive, "-C", dir, "input"},
		{"/usr/bin/xz", "-c", input},
		{"/usr/bin/ls", "-l", "/usr/bin"},
		{"/usr/bin/python3", "-S", "-c", "import json; print(len(json.dumps(list(range(1000)))))"},
	} {
		t.Run(filepath.Base(argv[0]), func(t *testing.T) {
			if _, err := os.Stat(argv[0]); err != nil {
				testutil.SkipOrFail(t, argv[0]+" not found")
			}
			os.Remove(archive)
			wantBlocks, wantBytes := valgrindInUse(t, vg, argv)
			os.Remove(archive)
			// Default tables, and tables small enough that buckets
			// fill: blocks move out of them while the program runs.
			for _, kv := range fixedEnv {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			for _, max := range []uint32{0, 1 << 12} {
				c, _ := launchTo(t, io.Discard, Options{MaxAllocations: max}, argv...)
				checkNoLoss(t, c)
				var blocks, bytes uint64
				for _, s := range c.Sites {
					if s.Kind == analyze.KindMalloc {
						blocks += s.LiveCount
						bytes += s.LiveBytes
					}
				}
				if blocks != wantBlocks || bytes != wantBytes {
					t.Errorf("%s (--max-allocations %d): %d blocks, %d bytes in use at exit; valgrind: %d blocks, %d bytes", argv[0], max, blocks, bytes, wantBlocks, wantBytes)
				}
			}
			t.Logf("%d blocks, %d bytes in use at exit, as valgrind counts", wantBlocks, wantBytes)
		})
	}
}

// fixedEnv makes two runs of a program make the same calls: the C locale,
// and Python's string hashes unrandomized (valgrind's run gets it, and
// leakscope's inherits it).
var fixedEnv = []string{"LC_ALL=C", "PYTHONHASHSEED=0"}

// inUse is memcheck's heap summary line.
var inUse = regexp.MustCompile(`in use at exit: ([0-9,]+) bytes in ([0-9,]+) blocks`)

// valgrindInUse runs argv under valgrind's memcheck and returns the heap
// blocks and bytes in use when it exited.
func valgrindInUse(t *testing.T, vg string, argv []string) (blocks, size uint64) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "valgrind.log")
	cmd := exec.Command(vg, append([]string{"--tool=memcheck", "--run-libc-freeres=no", "--leak-check=no", "--log-file=" + logPath}, argv...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.Env = append(os.Environ(), fixedEnv...)
	err := cmd.Run()
	log, rerr := os.ReadFile(logPath)
	if err != nil || rerr != nil {
		t.Fatalf("valgrind %s: %v %v\n%s", argv[0], err, rerr, log)
	}
	m := inUse.FindSubmatch(log)
	if m == nil {
		t.Fatalf("valgrind %s: no heap summary in\n%s", argv[0], log)
	}
	number := func(s []byte) uint64 {
		n, err := strconv.ParseUint(strings.ReplaceAll(string(s), ",", ""), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return number(m[2]), number(m[1])
}
