package procfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseMaps checks that ParseMaps never panics, that it fails exactly
// when some line is malformed on its own (reporting the first such line),
// and that what it returns is well formed and survives a round trip
// through the kernel's format.
func FuzzParseMaps(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.maps")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		// Each line alone as well, so mutations explore single lines.
		for line := range bytes.Lines(data) {
			f.Add(line)
		}
	}
	f.Add([]byte("7000-8000 r-xp 00000000 fe:00 1 /x (deleted)\n\n8000-9000 rw-s 10 0:0 0\n"))
	f.Add([]byte("8000-7000 r-xp 00000000 fe:00 1 /x\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		maps, err := ParseMaps(bytes.NewReader(data))

		// Oracle: parse line by line, the way the kernel writes them.
		lines := strings.Split(string(data), "\n")
		if strings.HasSuffix(string(data), "\n") {
			lines = lines[:len(lines)-1]
		}
		firstBad := 0
		var want []Mapping
		for i, line := range lines {
			if line == "" {
				continue
			}
			m, lerr := parseMapsLine(line)
			if lerr != nil || len(line) > maxLineBytes {
				firstBad = i + 1
				break
			}
			want = append(want, m)
		}

		if firstBad == 0 {
			if err != nil {
				t.Fatalf("no malformed line, but error %v", err)
			}
		} else {
			if err == nil {
				t.Fatalf("line %d malformed, but no error", firstBad)
			}
			if prefix := fmt.Sprintf("parse maps line %d: ", firstBad); !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("error %q, want prefix %q", err, prefix)
			}
			if maps != nil {
				t.Fatalf("error %v with %d mappings, want none", err, len(maps))
			}
			return
		}
		if len(maps) != len(want) {
			t.Fatalf("%d mappings, want %d", len(maps), len(want))
		}
		for i, m := range maps {
			if m != want[i] {
				t.Fatalf("mapping %d = %+v, line alone gives %+v", i, m, want[i])
			}
			if m.Start >= m.End {
				t.Fatalf("mapping %+v: Start not below End", m)
			}
			if !validPerms(m.Perms) || !validDev(m.Dev) {
				t.Fatalf("mapping %+v: bad perms or dev", m)
			}
			again, err := parseMapsLine(format(m))
			if err != nil || again != m {
				t.Fatalf("round trip of %+v via %q = %+v, %v", m, format(m), again, err)
			}
		}
	})
}

// format writes m as the kernel does (show_vma_header_prefix and seq_pad).
func format(m Mapping) string {
	s := fmt.Sprintf("%08x-%08x %s %08x %s %d ", m.Start, m.End, m.Perms, m.Offset, m.Dev, m.Inode)
	if m.Path == "" && !m.Deleted {
		return s
	}
	if len(s) < 73 {
		s += strings.Repeat(" ", 73-len(s))
	}
	s += m.Path
	if m.Deleted {
		s += deletedSuffix
	}
	return s
}

// FuzzParseStat checks that ParseStat never panics, that it succeeds
// only when the fields after the last ')' hold a one-letter state and
// decimal fields 4, 9 and 22, returning them, and that any command name,
// however many parentheses and spaces it holds, round-trips.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 25 0\n"), "kthreadd", uint64(2129984), uint64(25))
	f.Add([]byte("77 (a) b (c)) S 1 77 77 0 -1 4194560 0 0\n"), "a) b (c)", uint64(4194560), uint64(0))
	f.Add([]byte("1 (x"), "", uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, comm string, flags, start uint64) {
		got, err := ParseStat(data)
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		var fields []string
		if i >= 0 {
			fields = strings.Fields(s[i+1:])
		}
		if err == nil {
			ppid, _ := strconv.ParseUint(fields[1], 10, 64)
			fl, _ := strconv.ParseUint(fields[6], 10, 64)
			st, _ := strconv.ParseUint(fields[19], 10, 64)
			if got.State != fields[0][0] || uint64(got.PPid) != ppid || got.Flags != fl || got.StartTime != st {
				t.Fatalf("ParseStat(%q) = %+v; fields say %s %d %d %d", data, got, fields[0], ppid, fl, st)
			}
		}

		line := fmt.Sprintf("4242 (%s) S 1 4242 4242 0 -1 %d 0 0 0 0 0 0 0 0 20 0 1 0 %d 0\n", comm, flags, start)
		if got, err := ParseStat([]byte(line)); err != nil || got != (Stat{State: 'S', PPid: 1, Flags: flags, StartTime: start}) {
			t.Fatalf("round trip of comm %q: %+v, %v", comm, got, err)
		}
	})
}

// FuzzParseCmdline checks that parseCmdline never panics, never returns
// nil, and loses nothing: joined with NULs, the arguments are the input
// less one trailing NUL.
func FuzzParseCmdline(f *testing.F) {
	f.Add([]byte("/bin/sh\x00-c\x00echo a b\x00"))
	f.Add([]byte("nginx: worker process"))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		args := parseCmdline(data)
		if args == nil {
			t.Fatal("nil argument vector")
		}
		want := strings.TrimSuffix(string(data), "\x00")
		if got := strings.Join(args, "\x00"); got != want {
			t.Fatalf("parseCmdline(%q) = %q, joined %q, want %q", data, args, got, want)
		}
	})
}
