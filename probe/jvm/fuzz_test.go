package jvm

import (
	"bytes"
	"os"
	"testing"
)

// FuzzParsePerfMap checks that ParsePerfMap never panics, that it returns a
// map exactly when it returns no error, and that lookups agree with a
// linear scan: every address found lies in the symbol returned, no symbol
// holding it starts later, and an address no symbol holds is not found.
func FuzzParsePerfMap(f *testing.F) {
	data, err := os.ReadFile("testdata/jdk17.map")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	for line := range bytes.Lines(data) {
		f.Add(line)
	}
	f.Add([]byte("1000 100 outer\n1040 10 inner\n1040 10 twin\n2000 0 empty\n"))
	f.Add([]byte("0x7f04e0940b80 0x17de0 Interpreter\r\n\nLjava/lang/Object;::<init>\n"))
	f.Add([]byte("ffffffffffffff00 ff void a.B.c()"))

	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParsePerfMap(bytes.NewReader(data))
		if (m == nil) == (err == nil) {
			t.Fatalf("map %v with error %v", m, err)
		}
		if err != nil {
			return
		}
		probes := []uint64{0, ^uint64(0)}
		for i, s := range m.syms {
			if s.Size == 0 || s.End() < s.Start || s.Name == "" {
				t.Fatalf("bad symbol %+v", s)
			}
			if i > 0 && m.syms[i-1].Start > s.Start {
				t.Fatalf("symbols not sorted at %d", i)
			}
			probes = append(probes, s.Start, s.Start-1, s.End()-1, s.End())
		}
		for _, addr := range probes {
			got, ok := m.Lookup(addr)
			var want *Symbol
			for i := range m.syms {
				s := &m.syms[i]
				if addr >= s.Start && addr < s.End() && (want == nil || s.Start > want.Start ||
					(s.Start == want.Start && s.End() < want.End())) {
					want = s
				}
			}
			if ok != (want != nil) {
				t.Fatalf("Lookup(%#x) found=%v, linear scan found=%v", addr, ok, want != nil)
			}
			if ok && (addr < got.Start || addr >= got.End() || got.Start != want.Start || got.End() != want.End()) {
				t.Fatalf("Lookup(%#x) = %+v, want %+v", addr, got, *want)
			}
		}
	})
}
