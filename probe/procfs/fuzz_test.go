package procfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
