package jvm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Kind says what a piece of the code cache is.
type Kind uint8

// Kinds of code in the code cache.
const (
	KindUnknown     Kind = iota // not in the perf map
	KindMethod                  // a compiled Java method, or a native method's wrapper
	KindInterpreter             // the template interpreter: some interpreted method
	KindStub                    // a VM stub, adapter or blob ("StubRoutines (1)", "I2C/C2I adapters")
)

// Interpreted is the name given to frames in the template interpreter: the
// perf map names only the interpreter, not the method it runs.
const Interpreted = "[interpreted]"

// Symbol is one line of a perf map: a range of code and its name.
type Symbol struct {
	Start, Size uint64 // runtime address and length in bytes of the code
	// Name is a Java method as package.Class.method (no return type or
	// parameters; overloads share a name), Interpreted, or the VM's name
	// for a stub.
	Name string
	Kind Kind
}

// End is the first address past the symbol's code.
func (s Symbol) End() uint64 { return s.Start + s.Size }

// PerfMap is a perf map (/tmp/perf-<pid>.map) ready for lookups.
type PerfMap struct {
	syms   []Symbol // sorted by Start, then by End descending
	maxEnd []uint64 // maxEnd[i] is the largest End of syms[:i+1]
}

// Len is the number of symbols in the map.
func (m *PerfMap) Len() int { return len(m.syms) }

// Lookup returns the innermost symbol whose code holds addr.
func (m *PerfMap) Lookup(addr uint64) (Symbol, bool) {
	if m == nil {
		return Symbol{}, false
	}
	i := sort.Search(len(m.syms), func(i int) bool { return m.syms[i].Start > addr }) - 1
	// Symbols may nest (a blob listed with its stubs): walk back while an
	// earlier symbol can still reach addr; the first hit starts latest.
	for ; i >= 0 && m.maxEnd[i] > addr; i-- {
		if addr < m.syms[i].End() {
			return m.syms[i], true
		}
	}
	return Symbol{}, false
}

// maxPerfMapLine bounds one line: a Java signature is well under this.
const maxPerfMapLine = 64 << 10

// ParsePerfMap parses a perf map: one symbol per line, "START SIZE NAME",
// START and SIZE in hex with or without 0x, NAME up to the end of the line
// (it may hold spaces). Empty lines and symbols of size 0 are skipped. A
// malformed line stops parsing with an error naming it ("parse perf map
// line 3: ..."): the result is every symbol or an error, never a silently
// partial map.
func ParsePerfMap(r io.Reader) (*PerfMap, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxPerfMapLine)
	var syms []Symbol
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		s, err := parsePerfMapLine(text)
		if err != nil {
			return nil, fmt.Errorf("parse perf map line %d: %w", line, err)
		}
		if s.Size > 0 {
			syms = append(syms, s)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("parse perf map line %d: longer than %d bytes", line+1, maxPerfMapLine)
		}
		return nil, fmt.Errorf("read perf map: %w", err)
	}
	return newPerfMap(syms), nil
}

func newPerfMap(syms []Symbol) *PerfMap {
	sort.SliceStable(syms, func(i, j int) bool {
		if syms[i].Start != syms[j].Start {
			return syms[i].Start < syms[j].Start
		}
		return syms[i].End() > syms[j].End()
	})
	m := &PerfMap{syms: syms, maxEnd: make([]uint64, len(syms))}
	var end uint64
	for i, s := range syms {
		end = max(end, s.End())
		m.maxEnd[i] = end
	}
	return m
}

func parsePerfMapLine(s string) (Symbol, error) {
	start, rest, ok := strings.Cut(strings.TrimLeft(s, " \t"), " ")
	if !ok {
		return Symbol{}, fmt.Errorf("want START SIZE NAME in %q", s)
	}
	size, name, ok := strings.Cut(strings.TrimLeft(rest, " \t"), " ")
	if !ok {
		return Symbol{}, fmt.Errorf("want START SIZE NAME in %q", s)
	}
	var sym Symbol
	var err error
	if sym.Start, err = parseHex(start); err != nil {
		return Symbol{}, fmt.Errorf("start %q: %w", start, err)
	}
	if sym.Size, err = parseHex(size); err != nil {
		return Symbol{}, fmt.Errorf("size %q: %w", size, err)
	}
	if sym.Start+sym.Size < sym.Start {
		return Symbol{}, fmt.Errorf("range %s+%s wraps around", start, size)
	}
	raw := strings.TrimSpace(name)
	if raw == "" {
		return Symbol{}, errors.New("empty name")
	}
	sym.Name, sym.Kind = javaName(raw)
	return sym, nil
}

func parseHex(s string) (uint64, error) {
	h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if h == "" || h[0] == '+' || h[0] == '-' {
		return 0, errors.New("not a hex number")
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0, errors.New("not a 64-bit hex number")
	}
	return v, nil
}

// javaName turns a perf map name into the name leakscope shows:
//
//	void java.util.zip.Inflater.<init>(boolean)   HotSpot (Compiler.perfmap, DumpPerfMapAtExit)
//	Ljava/util/zip/Inflater;::<init>              perf-map-agent
//	Ljava/util/zip/Inflater;.<init>(Z)V           perf-map-agent with signatures
//
// all become java.util.zip.Inflater.<init>. "Interpreter" becomes
// Interpreted; any other name is a stub and is kept as it is.
func javaName(raw string) (string, Kind) {
	if raw == "Interpreter" {
		return Interpreted, KindInterpreter
	}
	if strings.HasPrefix(raw, "L") {
		if i := strings.Index(raw, ";"); i > 1 && !strings.ContainsAny(raw[:i], " ") {
			class := strings.ReplaceAll(raw[1:i], "/", ".")
			rest := strings.TrimPrefix(strings.TrimPrefix(raw[i+1:], ":"), ":")
			rest = strings.TrimPrefix(rest, ".")
			if j := strings.IndexAny(rest, "( "); j >= 0 {
				rest = rest[:j]
			}
			if rest != "" {
				return class + "." + rest, KindMethod
			}
		}
	}
	// HotSpot's Method::external_name: "RETURN_TYPE CLASS.METHOD(PARAMS)".
	// Stubs may hold parentheses too ("StubRoutines (1)"), but never right
	// after a name without a space.
	if strings.HasSuffix(raw, ")") {
		if i := strings.IndexByte(raw, '('); i > 0 && raw[i-1] != ' ' {
			head := raw[:i]
			head = head[strings.LastIndexByte(head, ' ')+1:]
			if strings.Contains(head, ".") {
				return head, KindMethod
			}
		}
	}
	return raw, KindStub
}
