package analyze

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/DataDog/gostackparse"
)

// Goroutine is one goroutine of a Go program's goroutine dump, as
// /debug/pprof/goroutine?debug=2 or runtime.Stack(buf, true) print it.
type Goroutine struct {
	ID    int
	State string // "chan receive", "select", "IO wait", "running", ...
	// Wait is how long the goroutine has been blocked, in whole minutes as
	// the runtime prints it; 0 under a minute and for running goroutines.
	Wait  time.Duration
	Stack []string // function names, innermost first, inlined calls included
}

// GoroutineGroup is goroutines of a dump that share a state and a top
// frame and whose stacks run through a leak's Go code.
type GoroutineGroup struct {
	Count    int
	State    string
	Wait     time.Duration // the shortest wait in the group: every one has waited at least this long
	Function string        // innermost frame outside the Go runtime: where they are
}

// maxDumpBytes bounds what ParseGoroutines reads: a dump of a million
// goroutines is a few hundred megabytes.
const maxDumpBytes = 1 << 30

// ParseGoroutines reads a goroutine dump in the runtime's text format
// (debug=2). Goroutines the parser cannot read are skipped; it fails when
// the input holds none it can read, so a dump is never silently empty.
// It never panics, whatever the input.
func ParseGoroutines(r io.Reader) ([]Goroutine, error) {
	gs, errs := gostackparse.Parse(io.LimitReader(r, maxDumpBytes))
	out := make([]Goroutine, 0, len(gs))
	for _, g := range gs {
		if g == nil {
			continue
		}
		c := Goroutine{ID: g.ID, State: g.State, Wait: g.Wait}
		for _, f := range g.Stack {
			if f != nil {
				c.Stack = append(c.Stack, f.Func)
			}
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		if len(errs) > 0 {
			return nil, fmt.Errorf("parse goroutine dump: %w", errs[0])
		}
		return nil, errors.New("parse goroutine dump: no goroutine found (want the text of /debug/pprof/goroutine?debug=2)")
	}
	return out, nil
}

// runtimeFrame reports whether fn belongs to the Go runtime or to cgo's
// generated call stubs: frames every goroutine or every cgo call shares,
// which say nothing about which code a goroutine runs.
func runtimeFrame(fn string) bool {
	return strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "_cgo_") ||
		strings.Contains(fn, "._Cfunc_") || strings.Contains(fn, "._cgo_") || fn == "crosscall2"
}

// CorrelateGoroutines sets Goroutines on every leak of r: the goroutines
// of gs whose stacks run through a function of the leak's stack, outside
// the Go runtime and cgo stubs (C functions never appear in a goroutine
// dump, so only Go frames can match), grouped by state and top frame,
// largest group first. A leak no goroutine runs through gets none.
//
// A match says a goroutine is still inside code that made the leak's
// allocations, e.g. 12 goroutines blocked in chan receive in the function
// that opened 12 zlib streams still live; it does not prove which
// goroutine made which allocation.
func CorrelateGoroutines(r *Result, gs []Goroutine) {
	for i := range r.Leaks {
		l := &r.Leaks[i]
		l.Goroutines = nil
		funcs := map[string]bool{}
		for _, f := range l.Site.Stack.Frames {
			if f.Function != "" && !runtimeFrame(f.Function) {
				funcs[f.Function] = true
			}
		}
		if len(funcs) == 0 {
			continue
		}
		groups := map[[2]string]*GoroutineGroup{}
		for _, g := range gs {
			if !slices.ContainsFunc(g.Stack, func(fn string) bool { return funcs[fn] }) {
				continue
			}
			top := ""
			if j := slices.IndexFunc(g.Stack, func(fn string) bool { return !runtimeFrame(fn) }); j >= 0 {
				top = g.Stack[j]
			}
			key := [2]string{g.State, top}
			gg, ok := groups[key]
			if !ok {
				gg = &GoroutineGroup{State: g.State, Function: top, Wait: g.Wait}
				groups[key] = gg
			}
			gg.Count++
			gg.Wait = min(gg.Wait, g.Wait)
		}
		for _, gg := range groups {
			l.Goroutines = append(l.Goroutines, *gg)
		}
		slices.SortFunc(l.Goroutines, func(a, b GoroutineGroup) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Function, b.Function), cmp.Compare(a.State, b.State))
		})
	}
}

// String describes the group in one phrase, e.g. "12 goroutines in chan
// receive for 31m in main.(*decoder).run".
func (g GoroutineGroup) String() string {
	noun := "goroutines"
	if g.Count == 1 {
		noun = "goroutine"
	}
	s := fmt.Sprintf("%d %s in %s", g.Count, noun, g.State)
	switch {
	case g.Wait >= time.Hour:
		s += " for " + FormatDuration(g.Wait)
	case g.Wait > 0:
		s += fmt.Sprintf(" for %dm", int(g.Wait.Minutes()))
	}
	if g.Function != "" {
		s += " in " + g.Function
	}
	return s
}
