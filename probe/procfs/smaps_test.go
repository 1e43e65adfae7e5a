package procfs

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestParseSmaps(t *testing.T) {
	data, err := os.ReadFile("testdata/c.smaps")
	if err != nil {
		t.Fatal(err)
	}
	regs, err := ParseSmaps(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 6 {
		t.Fatalf("got %d regions, want 6", len(regs))
	}
	heap := regs[1]
	if heap.Path != "[heap]" || heap.Rss != 32772<<10 || heap.Anonymous != 32772<<10 {
		t.Errorf("heap = %+v", heap)
	}
	if r := regs[2]; r.Rss != 20<<10 || r.Swap != 8<<10 || r.Path != "" {
		t.Errorf("arena = %+v", r)
	}
	if r := regs[4]; r.Path != "/memfd:odd name" || !r.Deleted || r.Rss != 1<<20 {
		t.Errorf("memfd = %+v", r)
	}
	for _, bad := range []string{
		"Rss: 4 kB\n",
		"7000-8000 r-xp 00000000 fe:00 1 /x\nRss: four kB\n",
		"7000-8000 r-xp 00000000 fe:00 1 /x\nRss: 4 MB\n",
		"7000-8000 r-xp 00000000 fe:00 1 /x\nRss: 99999999999999999999 kB\n",
		"7000-8000 r-xp 00000000 fe:00 1 /x\nRss: 18014398509481984 kB\n",
		"8000-7000 r-xp 00000000 fe:00 1 /x\n",
	} {
		if regs, err := ParseSmaps(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseSmaps(%q) = %+v, want an error", bad, regs)
		}
	}
}

func TestReadSmapsSelf(t *testing.T) {
	regs, err := ReadSmaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var rss uint64
	for _, r := range regs {
		rss += r.Rss
	}
	st, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	if rss == 0 || len(st) == 0 {
		t.Fatalf("rss %d from %d regions", rss, len(regs))
	}
}

func TestParseSyscallSP(t *testing.T) {
	for _, c := range []struct {
		in   string
		sp   uint64
		want bool
	}{
		{"230 0x1 0x0 0x7ffc8e3b0a40 0x7ffc8e3b0a40 0x0 0x0 0x7ffc8e3b0a18 0x7f5d1c2e8a35\n", 0x7ffc8e3b0a18, true},
		{"-1 0x7f5d1b7fed40 0x7f5d1c2e8a35\n", 0x7f5d1b7fed40, true},
		{"running\n", 0, false},
		{"-1 0x0 0x1\n", 0, false},
		{"x 0x1 0x0 0x0 0x0 0x0 0x0 0x10 0x1\n", 0, false},
		{"1 0x1 0x0 0x0 0x0 0x0 0x0 10 0x1\n", 0, false},
		{"", 0, false},
	} {
		sp, ok := ParseSyscallSP([]byte(c.in))
		if sp != c.sp || ok != c.want {
			t.Errorf("ParseSyscallSP(%q) = %#x, %v; want %#x, %v", c.in, sp, ok, c.sp, c.want)
		}
	}
}

func TestThreadStackPointersSelf(t *testing.T) {
	sps, unknown, err := ThreadStackPointers(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(sps)+unknown == 0 {
		t.Fatal("no thread")
	}
}

// FuzzParseSmaps checks that ParseSmaps never panics, that it returns
// regions exactly when it returns no error, that every region is a well
// formed mapping, and that the mappings are those ParseMaps finds in the
// mapping lines alone when every field line is well formed.
func FuzzParseSmaps(f *testing.F) {
	data, err := os.ReadFile("testdata/c.smaps")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("7000-8000 r-xp 00000000 fe:00 1 /x\nRss: 4 kB\nAnonymous: 4 kB\n"))
	f.Add([]byte("a000-b000 rw-p 0 0:0 0 \nSwap:  0 kB\nVmFlags: rd\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		regs, err := ParseSmaps(bytes.NewReader(data))
		if err != nil {
			if regs != nil {
				t.Fatalf("error %v with %d regions", err, len(regs))
			}
			return
		}
		var mapLines bytes.Buffer
		for line := range bytes.Lines(data) {
			if _, _, field := smapsField(bytes.TrimSuffix(line, []byte("\n"))); !field {
				mapLines.Write(line)
			}
		}
		maps, merr := ParseMaps(&mapLines)
		if merr != nil {
			t.Fatalf("ParseSmaps took what ParseMaps refuses: %v", merr)
		}
		if len(maps) != len(regs) {
			t.Fatalf("%d regions, %d mappings", len(regs), len(maps))
		}
		for i, r := range regs {
			if r.Mapping != maps[i] {
				t.Fatalf("region %d is %+v, mapping %+v", i, r.Mapping, maps[i])
			}
			if r.Start >= r.End {
				t.Fatalf("region %d: empty range", i)
			}
		}
	})
}

// FuzzParseSyscallSP checks that ParseSyscallSP never panics and finds a
// non-zero stack pointer whenever it succeeds.
func FuzzParseSyscallSP(f *testing.F) {
	f.Add([]byte("230 0x1 0x0 0x7ffc8e3b0a40 0x7ffc8e3b0a40 0x0 0x0 0x7ffc8e3b0a18 0x7f5d1c2e8a35\n"))
	f.Add([]byte("-1 0x7f5d1b7fed40 0x7f5d1c2e8a35\n"))
	f.Add([]byte("running\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if sp, ok := ParseSyscallSP(data); ok && sp == 0 {
			t.Fatal("ok with a zero stack pointer")
		}
	})
}
