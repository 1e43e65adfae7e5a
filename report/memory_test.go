package report

import (
	"testing"

	"github.com/leakscope/leakscope/analyze"
)

// The memory header says a traced part's resident bytes and, when its
// sites hold more, how much they hold; when none of the allocator's
// memory was recognized (chromium's PartitionAlloc, jemalloc), it says
// what the sites hold and where it is counted instead of "0 B".
func TestMemoryLineSaysWhereTracedBytesAre(t *testing.T) {
	for _, c := range []struct {
		name  string
		parts []analyze.MemoryPart
		want  string
	}{
		{"resident", []analyze.MemoryPart{{Name: analyze.PartMalloc, Bytes: 1 << 20, Outstanding: 1 << 20}, {Name: analyze.PartUnexplained, Bytes: 1 << 20}},
			"RSS 2.0 MiB at +1s = malloc outstanding 1.0 MiB + unexplained 1.0 MiB (50.0%)"},
		{"partly resident", []analyze.MemoryPart{{Name: analyze.PartMalloc, Bytes: 1 << 20, Outstanding: 3 << 20}, {Name: analyze.PartUnexplained, Bytes: 1 << 20}},
			"RSS 2.0 MiB at +1s = malloc outstanding 1.0 MiB of 3.0 MiB outstanding + unexplained 1.0 MiB (50.0%)"},
		{"not recognized", []analyze.MemoryPart{{Name: analyze.PartMalloc, Outstanding: 3 << 19}, {Name: analyze.PartUnexplained, Bytes: 2 << 20}},
			"RSS 2.0 MiB at +1s = malloc outstanding 1.5 MiB, in mappings not recognized as the allocator's (counted below) + unexplained 2.0 MiB (100.0%)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			capture := &analyze.Capture{Target: analyze.Target{Pid: 7}, Duration: 2e9,
				Memory: []analyze.Memory{{At: 1e9, Processes: []analyze.ProcessMemory{{Pid: 7, RSS: 2 << 20, Parts: c.parts}}}}}
			r := analyze.Rank(capture, analyze.Options{})
			if got := memoryLine(r); got != c.want {
				t.Errorf("memoryLine =\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}
