//go:build linux

package kernel

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
)

// generated is one bpf2go target's output: its Go file and its object.
type generated struct{ goFile, object string }

// The targets bpf2go builds (gen.go), the x86-64 one first.
var (
	leakTargets = []generated{
		{"leak_x86_bpfel.go", "leak_x86_bpfel.o"},
		{"leak_arm64_bpfel.go", "leak_arm64_bpfel.o"},
	}
	harnessTargets = []generated{
		{"../internal/bpftest/harness_x86_bpfel.go", "../internal/bpftest/harness_x86_bpfel.o"},
		{"../internal/bpftest/harness_arm64_bpfel.go", "../internal/bpftest/harness_arm64_bpfel.o"},
	}
)

// archDependent are the generated types whose values may differ between
// targets: enum arg_reg names each architecture's own registers.
var archDependent = map[string]bool{"leakArgReg": true}

// Every target's generated Go declares the same types, constants and
// bindings, so user space reads the kernel's records alike on each: every
// struct has the same fields, sizes and padding (bpf2go spells padding
// out), every enum the same values, but enum arg_reg's, which must fit
// the cookie's register fields on each target.
func TestGeneratedSameAcrossTargets(t *testing.T) {
	for _, targets := range [][]generated{leakTargets, harnessTargets} {
		want, _ := declarations(t, targets[0].goFile)
		for _, tg := range targets[1:] {
			got, regs := declarations(t, tg.goFile)
			for name, d := range want {
				if archDependent[declType(name)] {
					continue
				}
				if g, ok := got[name]; !ok {
					t.Errorf("%s lacks %s of %s", tg.goFile, name, targets[0].goFile)
				} else if g != d {
					t.Errorf("%s of %s differs from %s's:\n%s\nwant\n%s", name, tg.goFile, targets[0].goFile, g, d)
				}
			}
			for name := range got {
				if _, ok := want[name]; !ok && !archDependent[declType(name)] {
					t.Errorf("%s declares %s, which %s lacks", tg.goFile, name, targets[0].goFile)
				}
			}
			for name, v := range regs {
				if v >= 1<<leakCookieLayoutACOOKIE_ARG_BITS {
					t.Errorf("%s: %s = %d does not fit ACOOKIE_ARG_BITS (%d)", tg.goFile, name, v, leakCookieLayoutACOOKIE_ARG_BITS)
				}
			}
		}
	}
}

// Every target's object has the same programs, of the same types in the
// same sections, and the same maps, with the same key and value sizes.
func TestObjectsSameAcrossTargets(t *testing.T) {
	for _, targets := range [][]generated{leakTargets, harnessTargets} {
		want, err := ebpf.LoadCollectionSpec(targets[0].object)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range targets[1:] {
			got, err := ebpf.LoadCollectionSpec(tg.object)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Programs) != len(want.Programs) || len(got.Maps) != len(want.Maps) {
				t.Errorf("%s: %d programs and %d maps, %s: %d and %d", tg.object, len(got.Programs), len(got.Maps),
					targets[0].object, len(want.Programs), len(want.Maps))
			}
			for name, w := range want.Programs {
				g := got.Programs[name]
				if g == nil || g.Type != w.Type || g.AttachType != w.AttachType || g.SectionName != w.SectionName {
					t.Errorf("program %s: %s has %+v, %s %s %v %v", name, tg.object, g, targets[0].object, w.SectionName, w.Type, w.AttachType)
				}
			}
			for name, w := range want.Maps {
				g := got.Maps[name]
				if g == nil || g.Type != w.Type || g.KeySize != w.KeySize || g.ValueSize != w.ValueSize ||
					g.MaxEntries != w.MaxEntries || g.Flags != w.Flags {
					t.Errorf("map %s: %s has %+v, %s %v %d/%d x%d flags %#x", name, tg.object, g, targets[0].object,
						w.Type, w.KeySize, w.ValueSize, w.MaxEntries, w.Flags)
				}
			}
		}
	}
}

// declarations parses the generated Go file path into its top-level
// declarations by name (a method as Type.Method), each printed without
// comments, and the values of its enum arg_reg constants.
func declarations(t *testing.T, path string) (map[string]string, map[string]int) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.FromSlash(path), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]string{}
	regs := map[string]int{}
	print := func(n ast.Node) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil {
				name = print(d.Recv.List[0].Type) + "." + name
			}
			decls[name] = print(d)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					decls[s.Name.Name] = print(s)
				case *ast.ValueSpec:
					typ := ""
					if s.Type != nil {
						typ = print(s.Type)
					}
					for i, n := range s.Names {
						if n.Name == "_" {
							continue
						}
						v := ""
						if i < len(s.Values) {
							v = print(s.Values[i])
						}
						decls[typ+"."+n.Name] = typ + " = " + v
						if archDependent[typ] {
							if regs[n.Name], err = strconv.Atoi(v); err != nil {
								t.Fatalf("%s: %s = %s: %v", path, n.Name, v, err)
							}
						}
					}
				}
			}
		}
	}
	return decls, regs
}

// declType is the type of a constant or variable named by declarations
// ("leakArgReg.leakArgRegARG_REG_DI"); "" for anything else.
func declType(name string) string {
	for i := range len(name) {
		if name[i] == '.' {
			return name[:i]
		}
	}
	return ""
}
