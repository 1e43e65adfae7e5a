package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/termtext"
)

// TextOptions controls the text report.
type TextOptions struct {
	// Top prints the full stacks of the first Top leaks: 0 prints all of
	// them, like analyze.Options.Top, and a negative Top prints none.
	Top int
}

// Text writes r for a terminal: a header, the lost-event counts when any is
// non-zero, the capture's warnings, a table of leaks and then their stacks.
// The output depends only on r and opts, never on the clock.
//
// Every string that comes from the target or the capture file (function,
// file and module names, kinds, the command line, warnings, reasons) goes
// through termtext.Sanitize, so control characters print as escapes such
// as \x1b and \n: a name can neither drive the terminal nor start a line.
func Text(w io.Writer, r *analyze.Result, opts TextOptions) error {
	var b bytes.Buffer
	writeHeader(&b, r)
	if len(r.Leaks) == 0 {
		b.WriteString("\nno outstanding allocations")
		if r.Options.MinAge > 0 {
			b.WriteString(" at least " + analyze.FormatDuration(r.Options.MinAge) + " old")
		}
		b.WriteString("\n")
	} else {
		b.WriteString("\n")
		if err := writeTable(&b, r.Leaks, r.Capture); err != nil {
			return err
		}
		n := len(r.Leaks)
		if opts.Top > 0 {
			n = min(n, opts.Top)
		} else if opts.Top < 0 {
			n = 0
		}
		for _, l := range r.Leaks[:n] {
			b.WriteString("\n")
			writeLeak(&b, l, r.Capture)
		}
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write text report: %w", err)
	}
	return nil
}

func writeHeader(b *bytes.Buffer, r *analyze.Result) {
	c := r.Capture
	t := c.Target
	target := fmt.Sprintf("pid %d", t.Pid)
	if len(t.Command) > 0 {
		target += ", " + command(t.Command)
	}
	target += " (" + string(t.Runtime)
	if t.RuntimeVersion != "" {
		target += " " + t.RuntimeVersion
	}
	if st := t.Status(); st != "" {
		target += ", " + st
	}
	if t.ExitedAfter > 0 && len(c.Processes) > 0 {
		target += " at +" + analyze.FormatDuration(t.ExitedAfter) // which process ended when
	}
	target += ")"

	line := func(label, value string) { fmt.Fprintf(b, "%-13s%s\n", label+":", termtext.Sanitize(value)) }
	line("target", target)
	for _, e := range t.Execs {
		line("exec'd", e)
	}
	for _, p := range c.Processes {
		line("process", processLine(p))
		for _, e := range p.Execs {
			line("exec'd", e)
		}
	}
	line("started", c.StartedAt.Format(time.RFC3339))
	line("duration", analyze.FormatDuration(c.Duration))
	if sc := t.Scope(); sc != "" {
		line("scope", sc)
	}
	if st := t.Stops; st != nil {
		line("stops", st.String()+" (the command waited while leakscope updated its tables)")
	}
	if r.Options.MinAge > 0 {
		line("min age", analyze.FormatDuration(r.Options.MinAge))
	}
	if f := r.Options.Filters(); f != "" {
		line("filters", f+"; totals cover only what they keep")
	}
	if cs := r.Options.CulpritSkip; cs != nil {
		line("culprits", fmt.Sprintf("also past frames matching %q (--culprit-skip)", cs.String()))
	}
	if p := c.Probes; p != nil {
		line("probes", p.String())
		if !p.Malloc && p.ZlibBytes != "" {
			line("zlib bytes", p.ZlibBytes)
		}
	}
	line("outstanding", fmt.Sprintf("%s in %d allocations",
		analyze.FormatBytes(r.Totals.OutstandingBytes), r.Totals.OutstandingCount))
	shown := false
	if m := memoryLine(r); m != "" {
		line("memory", m)
		shown = true
	}
	for _, p := range c.Processes {
		if m := memoryLineOf(r, p.Pid); m != "" {
			line("memory", fmt.Sprintf("pid %d: %s", p.Pid, m))
			shown = true
		}
	}
	if u := untracedKinds(c); shown && u != "" {
		line("untraced", u)
	}
	if c.SampleBytes > 0 {
		sampling := fmt.Sprintf("one allocation traced per %s allocated on average; malloc counts and bytes are estimates",
			analyze.FormatBytes(c.SampleBytes))
		switch e := c.ExactBudget; {
		case e != nil && e.Past == 0:
			sampling = fmt.Sprintf("one allocation traced per %s allocated on average past an exact budget of %d calls a second per CPU, which traced every call (%d): counts are exact",
				analyze.FormatBytes(c.SampleBytes), e.PerSecond, e.Calls)
		case e != nil:
			sampling = fmt.Sprintf("one allocation traced per %s allocated on average past an exact budget of %d calls a second per CPU (%d traced exactly, %d past it); malloc rows marked ≈ are estimates",
				analyze.FormatBytes(c.SampleBytes), e.PerSecond, e.Calls, e.Past)
		}
		line("sampling", sampling)
	}
	// Unknown frees change no count (a free of memory never seen
	// allocated: made before tracing began, or glibc freeing its per-thread
	// cache at thread exit); the others mean counts may be short.
	if l := c.Lost; l.AllocationsDropped+l.StackErrors+l.FreesMissed+l.PendingDropped > 0 {
		line("lost", fmt.Sprintf("the capture missed events, so these numbers may be wrong: "+
			"allocations dropped %d, unknown frees %d, stack errors %d, frees missed %d, pending dropped %d",
			l.AllocationsDropped, l.UnknownFrees, l.StackErrors, l.FreesMissed, l.PendingDropped))
	} else if l.UnknownFrees > 0 {
		line("unknown", fmt.Sprintf("%d frees of memory never seen allocated (made before tracing began, or glibc's per-thread cache freed at thread exit); no count depends on them",
			l.UnknownFrees))
	}
	for _, w := range c.Warnings {
		line("warning", w)
	}
}

// processLine describes a process the target started, for the header.
func processLine(p analyze.Target) string {
	s := fmt.Sprintf("pid %d", p.Pid)
	if len(p.Command) > 0 {
		s += ", " + command(p.Command)
	}
	s += " (" + string(p.Runtime)
	if p.RuntimeVersion != "" {
		s += " " + p.RuntimeVersion
	}
	if st := p.Status(); st != "" {
		s += ", " + st
	}
	if p.ExitedAfter > 0 {
		s += " at +" + analyze.FormatDuration(p.ExitedAfter)
	}
	s += fmt.Sprintf("), started by pid %d at +%s", p.Parent, analyze.FormatDuration(p.StartedAfter))
	if st := p.Stops; st != nil {
		s += "; stops: " + st.String()
	}
	return s
}

// processOf names the process a site's allocations were made in.
//
// A process that exec'd is named by the program it exec'd last, whose
// allocations every row of it is (what an earlier image held went with
// the exec), and the command it began as.
func processOf(c *analyze.Capture, s *analyze.Site) string {
	pid := pidOf(c, s)
	what := fmt.Sprintf("pid %d", pid)
	p := c.Process(pid)
	switch {
	case p == nil:
	case len(p.Execs) > 0 && len(p.Command) > 0:
		what += ", " + p.Execs[len(p.Execs)-1] + " (exec'd by " + command(p.Command) + ")"
	case len(p.Execs) > 0:
		what += ", " + p.Execs[len(p.Execs)-1]
	case len(p.Command) > 0:
		what += ", " + command(p.Command)
	}
	return what
}

// pidOf is the process a site's allocations were made in.
func pidOf(c *analyze.Capture, s *analyze.Site) int {
	if s.Pid != 0 {
		return s.Pid
	}
	return c.Target.Pid
}

func writeTable(b *bytes.Buffer, leaks []analyze.Leak, c *analyze.Capture) error {
	align := []tw.Align{
		tw.AlignRight, tw.AlignLeft, tw.AlignLeft, tw.AlignRight, tw.AlignRight,
		tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignLeft,
	}
	// A PID column when the capture traced more than one process.
	multi := len(c.Processes) > 0
	if multi {
		align = slices.Insert(align, 1, tw.AlignRight)
	}
	var out bytes.Buffer
	table := tablewriter.NewTable(&out,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Lines:      tw.LinesNone,
				Separators: tw.SeparatorsNone,
			},
		})),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithPadding(tw.Padding{Right: "  ", Overwrite: true}),
		tablewriter.WithTrimSpace(tw.Off),
	)
	header := []string{"RANK", "KIND", "CLASS", "LIVE", "BYTES", "ALLOCS", "FREES", "OLDEST", "CULPRIT"}
	if multi {
		header = slices.Insert(header, 1, "PID")
	}
	table.Header(header)
	for _, l := range leaks {
		s := l.Site
		oldest := "-"
		if l.AgeKnown {
			oldest = analyze.FormatDuration(l.OldestAge)
		}
		top := "-"
		if l.Culprit != nil {
			top = termtext.Sanitize(shortFrame(*l.Culprit))
			if l.Verdict.Class == analyze.ClassPool {
				top = "asked the pool: " + top // never the holder
			}
		}
		count, bytes := liveText(l)
		row := []string{
			strconv.Itoa(l.Rank), termtext.Sanitize(string(s.Kind)), label(l), count,
			bytes, strconv.FormatUint(s.Allocs, 10),
			strconv.FormatUint(s.Frees, 10), oldest, top,
		}
		if multi {
			row = slices.Insert(row, 1, strconv.Itoa(pidOf(c, s)))
		}
		err := table.Append(row)
		if err != nil {
			return fmt.Errorf("add table row %d: %w", l.Rank, err)
		}
	}
	if err := table.Render(); err != nil {
		return fmt.Errorf("render table: %w", err)
	}
	// Padding leaves spaces at the end of every line; drop them so the
	// output diffs and copies cleanly.
	for line := range strings.Lines(out.String()) {
		b.WriteString(strings.TrimRight(line, " \n"))
		b.WriteString("\n")
	}
	return nil
}

// writeLeak prints why l ranks where it does and its full stack, leaf first.
func writeLeak(b *bytes.Buffer, l analyze.Leak, c *analyze.Capture) {
	s := l.Site
	fmt.Fprintf(b, "rank %d: %s, %s, score %.0f\n", l.Rank, termtext.Sanitize(string(s.Kind)), label(l), l.Score)
	if len(c.Processes) > 0 {
		fmt.Fprintf(b, "  - in process %s\n", termtext.Sanitize(processOf(c, s)))
	}
	for _, f := range fileLines(s.Files) {
		fmt.Fprintf(b, "  - %s\n", termtext.Sanitize(f))
	}
	for _, r := range l.Reasons {
		fmt.Fprintf(b, "  - %s\n", termtext.Sanitize(r))
	}
	if len(s.Stack.Frames) == 0 {
		b.WriteString("  (no frames)\n")
	}
	for i, f := range s.Stack.Frames {
		fmt.Fprintf(b, "  #%d %s\n", i, termtext.Sanitize(frame(*f)))
	}
	if s.Stack.Truncated != "" {
		fmt.Fprintf(b, "  … stack truncated: %s\n", termtext.Sanitize(s.Stack.Truncated))
	}
	if len(l.Goroutines) > 0 {
		b.WriteString("  goroutines whose stacks run through this one:\n")
		for _, g := range l.Goroutines {
			fmt.Fprintf(b, "    %s\n", termtext.Sanitize(g.String()))
		}
	}
}

// maxFilesShown is how many of a mmap.file row's files the text and
// HTML reports name; JSON lists them all.
const maxFilesShown = 5

// fileLines names the files a mmap.file row maps, most bytes first, one
// line each, the files past maxFilesShown summed in one.
func fileLines(files []analyze.MappedFile) []string {
	var out []string
	for i, f := range files {
		if i == maxFilesShown {
			var n, bytes uint64
			for _, g := range files[i:] {
				n += g.Count
				bytes += g.Bytes
			}
			return append(out, fmt.Sprintf("and %d more files: %d mappings, %s", len(files)-i, n, analyze.FormatBytes(bytes)))
		}
		out = append(out, fmt.Sprintf("maps %s: %d mappings, %s", f.Path, f.Count, analyze.FormatBytes(f.Bytes)))
	}
	return out
}

// label is l's class as shown, "-" when it has none.
func label(l analyze.Leak) string {
	if l.Verdict.Label == "" {
		return "-"
	}
	return l.Verdict.Label
}

// frame renders f as "function (module+0xoffset) file:line", dropping what
// is unknown: without a function it is just the location, and without a
// module the location is the absolute address. An inlined frame ends in
// "(inlined)".
func frame(f analyze.Frame) string {
	loc := fmt.Sprintf("0x%x", f.Address)
	if f.Module != "" {
		loc = fmt.Sprintf("%s+0x%x", f.Module, f.Offset)
	}
	s := loc
	if f.Function != "" {
		s = f.Function + " (" + loc + ")"
	}
	if f.File != "" {
		s += " " + f.File
		if f.Line > 0 {
			s += ":" + strconv.Itoa(f.Line)
		}
	}
	if f.Inlined {
		s += " (inlined)"
	}
	return s
}

// shortFrame renders f for a table cell: the function, or else the module's
// base name plus offset, or else the absolute address.
func shortFrame(f analyze.Frame) string {
	switch {
	case f.Function != "":
		return f.Function
	case f.Module != "":
		return fmt.Sprintf("%s+0x%x", filepath.Base(f.Module), f.Offset)
	default:
		return fmt.Sprintf("0x%x", f.Address)
	}
}

// command joins argv for display, quoting arguments that would otherwise
// be ambiguous.
func command(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// liveText is a row's live count and bytes as shown: "≈N ±E" for an
// estimate under sampling (analyze.Leak.Estimate), with its standard
// error when known.
func liveText(l analyze.Leak) (count, bytes string) {
	count, bytes = strconv.FormatUint(l.Count, 10), analyze.FormatBytes(l.Bytes)
	if !l.Estimate {
		return count, bytes
	}
	count, bytes = "≈"+count, "≈"+bytes
	if l.CountError > 0 {
		count += fmt.Sprintf(" ±%.0f", l.CountError)
		bytes += " ±" + analyze.FormatBytes(uint64(math.Round(l.BytesError)))
	}
	return count, bytes
}
