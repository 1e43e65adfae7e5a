package symbolize

import (
	"cmp"
	"debug/elf"
	"slices"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// symbol is one code address with the name chosen for it.
type symbol struct {
	addr, size uint64 // ELF vaddr; size in bytes, 0 when the symbol has none
	name       string // raw (mangled) name
	fn         bool   // STT_FUNC or STT_GNU_IFUNC, i.e. a real function
}

// symtab holds code symbols sorted by address, one per address.
type symtab struct {
	syms []symbol
	// maxEnd[i] is the largest addr+size among sized syms[:i+1]. Lookup
	// walks back from the nearest symbol only while a sized symbol could
	// still cover the address, so nested and overlapping symbols resolve
	// without scanning the whole table.
	maxEnd []uint64
}

// candidate is a symbol before aliases at the same address are merged.
type candidate struct {
	symbol
	symtab bool // from .symtab, whose names are preferred
	bind   elf.SymBind
}

// codeSymbol reports whether s can name code: a defined function, or an
// untyped label such as the entry points of hand-written assembly.
func codeSymbol(s elf.Symbol) bool {
	switch elf.ST_TYPE(s.Info) {
	case elf.STT_FUNC, elf.STT_GNU_IFUNC:
	case elf.STT_NOTYPE:
		// "$x", "$d" are ARM mapping symbols; ".L" are assembler locals.
		if strings.HasPrefix(s.Name, "$") || strings.HasPrefix(s.Name, ".L") {
			return false
		}
	default:
		return false
	}
	return s.Name != "" && s.Section != elf.SHN_UNDEF && s.Section < elf.SHN_LORESERVE
}

// newSymtab merges .symtab and .dynsym. At an address with several names
// (malloc, __libc_malloc, __GI___libc_malloc) it keeps the best one: a
// function over a label, .symtab over .dynsym, global over weak over local,
// then fewer leading underscores, then the shorter name. The size kept is
// the largest of the aliases.
func newSymtab(symtabSyms, dynSyms []elf.Symbol) symtab {
	var cands []candidate
	add := func(syms []elf.Symbol, fromSymtab bool) {
		for _, s := range syms {
			if !codeSymbol(s) {
				continue
			}
			t := elf.ST_TYPE(s.Info)
			cands = append(cands, candidate{
				symbol: symbol{addr: s.Value, size: s.Size, name: s.Name, fn: t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC},
				symtab: fromSymtab,
				bind:   elf.ST_BIND(s.Info),
			})
		}
	}
	add(symtabSyms, true)
	add(dynSyms, false)
	slices.SortFunc(cands, func(a, b candidate) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		return better(a, b)
	})

	var t symtab
	for _, c := range cands {
		if n := len(t.syms); n > 0 && t.syms[n-1].addr == c.addr {
			last := &t.syms[n-1]
			last.size = max(last.size, c.size)
			last.fn = last.fn || c.fn
			continue
		}
		t.syms = append(t.syms, c.symbol)
	}
	t.maxEnd = make([]uint64, len(t.syms))
	var end uint64
	for i, s := range t.syms {
		if s.size > 0 {
			end = max(end, s.addr+s.size)
		}
		t.maxEnd[i] = end
	}
	return t
}

// better orders aliases at one address, best first.
func better(a, b candidate) int {
	rank := func(bind elf.SymBind) int {
		switch bind {
		case elf.STB_GLOBAL:
			return 0
		case elf.STB_WEAK:
			return 1
		}
		return 2
	}
	underscores := func(s string) int { return len(s) - len(strings.TrimLeft(s, "_")) }
	switch {
	case a.fn != b.fn:
		if a.fn {
			return -1
		}
		return 1
	case a.symtab != b.symtab:
		if a.symtab {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(rank(a.bind), rank(b.bind)); c != 0 {
		return c
	}
	if c := cmp.Compare(underscores(a.name), underscores(b.name)); c != 0 {
		return c
	}
	if c := cmp.Compare(len(a.name), len(b.name)); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// lookup returns the symbol covering vaddr. When no sized symbol covers it,
// the nearest preceding symbol is used if it has no size and lies in the
// same section (sectionOf gives a section identity for an address, -1 for
// none): assembly entry points often carry no size, yet own the code up to
// the next symbol.
func (t *symtab) lookup(vaddr uint64, sectionOf func(uint64) int) (symbol, bool) {
	// i is the last symbol at or below vaddr.
	i, found := slices.BinarySearchFunc(t.syms, vaddr, func(s symbol, v uint64) int { return cmp.Compare(s.addr, v) })
	if !found {
		i--
	}
	if i < 0 {
		return symbol{}, false
	}
	for j := i; j >= 0 && t.maxEnd[j] > vaddr; j-- {
		if s := t.syms[j]; s.size > 0 && vaddr < s.addr+s.size {
			return s, true
		}
	}
	if s := t.syms[i]; s.size == 0 {
		if sec := sectionOf(vaddr); sec >= 0 && sec == sectionOf(s.addr) {
			return s, true
		}
	}
	return symbol{}, false
}

// demangled returns a readable name for C++ and Rust symbols, and name
// itself for everything else or when demangling fails.
func demangled(name string) string {
	if strings.HasPrefix(name, "_Z") || strings.HasPrefix(name, "_R") {
		return demangle.Filter(name)
	}
	return name
}

// funcIndex records defined STT_FUNC symbols by name for Lookup, and the
// ones .dynsym exports for Exports.
type funcIndex struct {
	byName  map[string]uint64
	exports map[string]bool
}

func newFuncIndex(symtabSyms, dynSyms []elf.Symbol) funcIndex {
	idx := funcIndex{byName: map[string]uint64{}, exports: map[string]bool{}}
	local := map[string]bool{} // names so far only seen as local
	add := func(s elf.Symbol) {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE || s.Name == "" {
			return
		}
		isLocal := elf.ST_BIND(s.Info) == elf.STB_LOCAL
		// A global definition wins over a static function of the same
		// name in some compilation unit; otherwise the first one wins.
		if _, seen := idx.byName[s.Name]; !seen || (local[s.Name] && !isLocal) {
			idx.byName[s.Name] = s.Value
			local[s.Name] = isLocal
		}
	}
	for _, s := range dynSyms {
		add(s)
		if b := elf.ST_BIND(s.Info); (b == elf.STB_GLOBAL || b == elf.STB_WEAK) &&
			elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && s.Section < elf.SHN_LORESERVE {
			idx.exports[s.Name] = true
		}
	}
	for _, s := range symtabSyms {
		add(s)
	}
	return idx
}

// Lookup returns the ELF virtual address of the defined function name (a
// raw, mangled name) from .symtab or .dynsym, so a uprobe can be placed on
// it or its code read. When a global and static functions share the name,
// the global one wins.
func (o *Object) Lookup(name string) (vaddr uint64, ok bool) {
	vaddr, ok = o.funcs.byName[name]
	return vaddr, ok
}

// Exports reports whether the object's dynamic symbol table defines name as
// a global or weak function, i.e. whether the dynamic linker can bind
// another object's calls to name here. This finds the object that really
// provides malloc (libc, or an allocator such as jemalloc) as opposed to
// objects that merely import it.
func (o *Object) Exports(name string) bool {
	return o.funcs.exports[name]
}
