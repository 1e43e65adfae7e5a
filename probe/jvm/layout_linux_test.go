package jvm

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// readTables reads testdata/vmstructs-<name>.txt: the VMStructs entries
// leakscope reads, as a running JVM of that build gave them.
func readTables(t *testing.T, name string) *VMStructs {
	t.Helper()
	f, err := os.Open("testdata/vmstructs-" + name + ".txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vs := &VMStructs{Fields: map[string]VMField{}, Sizes: map[string]uint64{}, Constants: map[string]int32{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		p := strings.SplitN(sc.Text(), " ", 4)
		if len(p) < 3 {
			t.Fatalf("bad line %q", sc.Text())
		}
		v, err := strconv.ParseInt(p[2], 0, 64)
		if err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		switch p[0] {
		case "field", "static":
			fl := VMField{Static: p[0] == "static"}
			if len(p) == 4 {
				fl.Type = p[3]
			}
			if fl.Static {
				fl.Address = uint64(v)
			} else {
				fl.Offset = uint64(v)
			}
			vs.Fields[p[1]] = fl
		case "size":
			vs.Sizes[p[1]] = uint64(v)
		case "const":
			vs.Constants[p[1]] = int32(v)
		}
	}
	return vs
}

// TestResolveReleases resolves the tables of OpenJDK 17 and Temurin 25:
// every field is found, under the name and at the width each release
// gives it, and the code blob layout follows from which fields exist.
func TestResolveReleases(t *testing.T) {
	type want struct {
		layout                blobLayout
		method, flags, pcsEnd string
		codeWidth, flagsWidth uint8
		kind                  bool
		heapBlock, cmSize     uint64
	}
	for name, w := range map[string]want{
		"jdk17": {blobLayout{}, "CompiledMethod::_method", "ConstMethod::_flags", "nmethod::_dependencies_offset", 8, 2, false, 16, 48},
		"jdk25": {blobLayout{codeOffsets: true, immutable: true, mutableMetadata: true}, "nmethod::_method", "ConstMethod::_flags._flags", "nmethod::_scopes_data_offset", 4, 4, true, 8, 56},
	} {
		t.Run(name, func(t *testing.T) {
			vs := readTables(t, name)
			l, missing := resolve(vs)
			for u, names := range missing {
				t.Errorf("missing for %v: %v", u, names)
			}
			if _, m := linesLayout(vs, &l, missing); len(m[useLines]) > 0 {
				t.Errorf("lines: missing %v", m[useLines])
			}
			if l.blob != w.layout {
				t.Errorf("layout %+v, want %+v", l.blob, w.layout)
			}
			if l.method.name != w.method || l.flags.name != w.flags || l.pcsEnd.name != w.pcsEnd {
				t.Errorf("found %s, %s, %s; want %s, %s, %s", l.method.name, l.flags.name, l.pcsEnd.name, w.method, w.flags, w.pcsEnd)
			}
			if l.codeBegin.width != w.codeWidth || l.codeEnd.width != w.codeWidth || l.flags.width != w.flagsWidth {
				t.Errorf("widths: code %d/%d, flags %d; want %d, %d", l.codeBegin.width, l.codeEnd.width, l.flags.width, w.codeWidth, w.flagsWidth)
			}
			if l.blobKind.ok() != w.kind || (w.kind && l.nmethodKind != 1) {
				t.Errorf("blob kind %+v (nmethod %d), want found=%v", l.blobKind, l.nmethodKind, w.kind)
			}
			if l.heapBlock != w.heapBlock || l.cmSize != w.cmSize {
				t.Errorf("sizeof HeapBlock %d, ConstMethod %d; want %d, %d", l.heapBlock, l.cmSize, w.heapBlock, w.cmSize)
			}
		})
	}
}

// TestResolveGaps: what a JVM lacks is named, with what it costs; only a
// field every name needs makes its tables unusable.
func TestResolveGaps(t *testing.T) {
	for _, tc := range []struct {
		drop  []string
		fatal string // the LayoutError, "" if none
		gap   string // a Gap's text, "" if none
	}{
		{drop: []string{"CodeBlob::_code_offset"},
			gap: "compiled Java frames are neither walked by their frame size nor named from the code heap: its VMStructs describe no CodeBlob::_code_begin or CodeBlob::_code_offset"},
		{drop: []string{"nmethod::_scopes_pcs_offset"},
			gap: "compiled Java frames are shown without the methods the JIT inlined into them: its VMStructs describe no nmethod::_scopes_pcs_offset"},
		{drop: []string{"CodeBlob::_mutable_data"},
			gap: "compiled Java frames are shown without the methods the JIT inlined into them: its VMStructs describe no nmethod::_metadata_offset or CodeBlob::_mutable_data"},
		{drop: []string{"ConstMethodFlags::_misc_has_linenumber_table"},
			gap: "Java frames have no source lines: its VMStructs describe no ConstMethodFlags::_misc_has_linenumber_table or ConstMethod::_has_linenumber_table"},
		{drop: []string{"Method::_constMethod", "Klass::_name"},
			fatal: "this JVM's VMStructs describe no Method::_constMethod nor Klass::_name"},
	} {
		vs := readTables(t, "jdk25")
		for _, d := range tc.drop {
			delete(vs.Fields, d)
			delete(vs.Constants, d)
		}
		_, err := newMethods(&fakeMemory{}, vs)
		var le *LayoutError
		switch {
		case tc.fatal != "":
			if !errors.As(err, &le) || err.Error() != tc.fatal {
				t.Errorf("without %v: %v, want LayoutError %q", tc.drop, err, tc.fatal)
			}
			continue
		case errors.As(err, &le):
			t.Errorf("without %v: %v, want a gap", tc.drop, err)
			continue
		}
		// The fake memory holds no interpreter, so newMethods fails
		// after resolving: the gaps are those resolve and linesLayout find.
		l, missing := resolve(vs)
		_, missing = linesLayout(vs, &l, missing)
		var got []string
		for _, g := range gaps(missing) {
			got = append(got, g.String())
		}
		if len(got) != 1 || got[0] != tc.gap {
			t.Errorf("without %v: gaps %q, want %q", tc.drop, got, tc.gap)
		}
	}
}
