package symbolize

import (
	"debug/elf"
	"testing"
)

func sym(name string, addr, size uint64, typ elf.SymType, bind elf.SymBind) elf.Symbol {
	return elf.Symbol{Name: name, Value: addr, Size: size, Info: elf.ST_INFO(bind, typ), Section: 14}
}

func TestSymtabLookup(t *testing.T) {
	const (
		fn    = elf.STT_FUNC
		label = elf.STT_NOTYPE
		glob  = elf.STB_GLOBAL
		weak  = elf.STB_WEAK
		local = elf.STB_LOCAL
	)
	symtab := []elf.Symbol{
		sym("__GI___libc_malloc", 0x1000, 0x100, fn, local),
		sym("__libc_malloc", 0x1000, 0x100, fn, glob),
		sym("malloc", 0x1000, 0x100, fn, glob),
		sym("outer", 0x2000, 0x600, fn, glob),
		sym("inner", 0x2050, 0x10, fn, local), // nested in outer
		sym("asm_entry", 0x3000, 0, label, glob),
		sym("sized_after", 0x3100, 0x10, fn, glob),
		sym("data_label", 0x5000, 0, label, glob), // another section
		sym("an_object", 0x2100, 0x8, elf.STT_OBJECT, glob),
		sym("$x", 0x2400, 0, label, local),
		{Name: "undefined", Info: elf.ST_INFO(glob, fn), Section: elf.SHN_UNDEF},
		{Name: "absolute", Value: 0x2500, Info: elf.ST_INFO(glob, fn), Section: elf.SHN_ABS},
	}
	dynsym := []elf.Symbol{
		sym("cfree", 0x1000, 0x100, fn, weak),
		sym("dyn_only", 0x4000, 0x20, fn, glob),
		sym("dyn_alias", 0x2000, 0x600, fn, glob),
	}
	st := newSymtab(symtab, dynsym)
	sectionOf := func(v uint64) int {
		switch {
		case 0x1000 <= v && v < 0x4100:
			return 1 // .text
		case 0x5000 <= v && v < 0x6000:
			return 2 // .data
		}
		return -1
	}
	tests := []struct {
		vaddr uint64
		want  string
	}{
		{0x1000, "malloc"}, // symtab, global, fewest underscores
		{0x10ff, "malloc"},
		{0x1100, ""},      // after malloc's end, before outer
		{0x2000, "outer"}, // .symtab name preferred over .dynsym's
		{0x2050, "inner"}, // innermost
		{0x205f, "inner"},
		{0x2060, "outer"}, // after inner, still in outer
		{0x2100, "outer"}, // objects are not code symbols
		{0x2400, "outer"}, // mapping symbols ignored
		{0x2600, ""},
		{0x3000, "asm_entry"}, // zero-size fallback
		{0x30ff, "asm_entry"},
		{0x3100, "sized_after"},
		{0x3110, ""}, // nearest preceding symbol is sized and ended
		{0x4010, "dyn_only"},
		{0x4100, ""}, // outside every section
		{0x5010, "data_label"},
		{0x0fff, ""},
		{0x2500, "outer"}, // SHN_ABS ignored
	}
	for _, tt := range tests {
		s, ok := st.lookup(tt.vaddr, sectionOf)
		if got := s.name; got != tt.want || ok != (tt.want != "") {
			t.Errorf("lookup(%#x) = %q, %v; want %q", tt.vaddr, got, ok, tt.want)
		}
	}
	if got, _ := st.lookup(0x3050, func(uint64) int { return -1 }); got.name != "" {
		t.Errorf("zero-size fallback used across sections: %q", got.name)
	}

	idx := newFuncIndex(symtab, dynsym)
	o := &Object{funcs: idx}
	for name, want := range map[string]uint64{"malloc": 0x1000, "inner": 0x2050, "dyn_only": 0x4000, "cfree": 0x1000} {
		if got, ok := o.Lookup(name); !ok || got != want {
			t.Errorf("Lookup(%q) = %#x, %v; want %#x", name, got, ok, want)
		}
	}
	for _, name := range []string{"asm_entry", "an_object", "undefined", "absolute", "nope"} {
		if _, ok := o.Lookup(name); ok {
			t.Errorf("Lookup(%q) found a non-function", name)
		}
	}
	for name, want := range map[string]bool{"cfree": true, "dyn_only": true, "malloc": false, "undefined": false} {
		if got := o.Exports(name); got != want {
			t.Errorf("Exports(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestFuncIndexPrefersGlobal(t *testing.T) {
	idx := newFuncIndex([]elf.Symbol{
		sym("init", 0x100, 4, elf.STT_FUNC, elf.STB_LOCAL),
		sym("init", 0x200, 4, elf.STT_FUNC, elf.STB_GLOBAL),
		sym("init", 0x300, 4, elf.STT_FUNC, elf.STB_LOCAL),
	}, nil)
	if got := idx.byName["init"]; got != 0x200 {
		t.Errorf("init at %#x, want the global one at 0x200", got)
	}
}

func TestDemangled(t *testing.T) {
	for in, want := range map[string]string{
		"_ZN4leak4Pool4grabEm":               "leak::Pool::grab(unsigned long)",
		"_ZNSt6vectorIiSaIiEE9push_backERKi": "std::vector<int, std::allocator<int> >::push_back(int const&)",
		"malloc":                             "malloc",
		"_Znotmangled":                       "_Znotmangled",
		"_RNvCs15kBYyAo9fc_7mycrate7example": "mycrate::example",
	} {
		if got := demangled(in); got != want {
			t.Errorf("demangled(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLineTableLookup(t *testing.T) {
	lt := lineTable{
		files: []string{"a.c", "b.c"},
		rows: []lineRow{
			{addr: 0x100, file: 0, line: 10},
			{addr: 0x110, file: 0, line: 11},
			{addr: 0x110, file: 1, line: 3}, // same address: the last row wins
			{addr: 0x120, line: -1},         // end of sequence
			{addr: 0x130, file: 1, line: 20},
			{addr: 0x140, line: -1},
			{addr: 0x140, file: 0, line: 30}, // next sequence starts at the end
			{addr: 0x150, line: -1},
		},
	}
	tests := []struct {
		vaddr uint64
		file  string
		line  int
	}{
		{0xff, "", 0},
		{0x100, "a.c", 10},
		{0x10f, "a.c", 10},
		{0x110, "b.c", 3},
		{0x11f, "b.c", 3},
		{0x120, "", 0},
		{0x12f, "", 0},
		{0x130, "b.c", 20},
		{0x140, "a.c", 30},
		{0x150, "", 0},
	}
	for _, tt := range tests {
		if file, line := lt.lookup(tt.vaddr); file != tt.file || line != tt.line {
			t.Errorf("lookup(%#x) = %s:%d, want %s:%d", tt.vaddr, file, line, tt.file, tt.line)
		}
	}
}
