package report

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/leakscope/leakscope/analyze"
)

// partKinds are the kinds whose sites make up a traced part.
var partKinds = map[string][]analyze.Kind{
	analyze.PartMalloc:   {analyze.KindMalloc},
	analyze.PartZlib:     {analyze.KindZlibInflate, analyze.KindZlibDeflate},
	analyze.PartDirect:   {"jvm.direct"},
	analyze.PartMappings: {analyze.KindMmapAnon},
}

// partCulprit names the culprit of the best-ranked leak of a traced part,
// "" when it has none; pool is set when that leak is a pool's growth,
// whose culprit asked the pool and is never the holder.
func partCulprit(r *analyze.Result, part string, pid int) (name string, pool bool) {
	kinds := partKinds[part]
	for _, l := range r.Leaks {
		if pidOf(r.Capture, l.Site) != pid {
			continue
		}
		for _, k := range kinds {
			if l.Site.Kind != k || l.Culprit == nil {
				continue
			}
			name := l.Culprit.Function
			if name == "" && l.Culprit.Module != "" {
				name = path.Base(l.Culprit.Module)
			}
			if name == "" {
				continue
			}
			return name, l.Verdict.Class == analyze.ClassPool
		}
	}
	return "", false
}

// memoryLine is the memory header: "RSS 75.8 MiB = malloc outstanding
// 64.0 MiB (from leak_buffers) + … + unexplained 4.0 MiB (5.3%)", for the
// target's latest breakdown; "" when the capture has none. Culprits are
// the process's own leaks'. Culprit names
// come from the target: a text sink escapes them.
func memoryLine(r *analyze.Result) string {
	return memoryLineOf(r, r.Capture.Target.Pid)
}

// memoryLineOf is memoryLine for process pid of the capture.
func memoryLineOf(r *analyze.Result, pid int) string {
	pm, at := r.Capture.LastMemory(pid)
	if pm == nil {
		return ""
	}
	var parts []string
	for _, p := range pm.Parts {
		s := p.Name + " " + analyze.FormatBytes(p.Bytes)
		switch {
		case p.Outstanding > 0 && p.Bytes == 0:
			// None of the allocator's memory was recognized (an
			// allocator other than glibc's keeps its own mappings):
			// what its sites hold is resident in the parts below.
			s = fmt.Sprintf("%s %s, in mappings not recognized as the allocator's (counted below)", p.Name, analyze.FormatBytes(p.Outstanding))
		case p.Outstanding > p.Bytes:
			s += fmt.Sprintf(" of %s outstanding", analyze.FormatBytes(p.Outstanding))
		}
		switch c, pool := partCulprit(r, p.Name, pid); {
		case c != "" && pool:
			s += " (pool growth; asked the pool: " + c + ")"
		case c != "":
			s += " (from " + c + ")"
		}
		if p.Name == analyze.PartUnexplained && pm.RSS > 0 {
			s += fmt.Sprintf(" (%.1f%%)", 100*float64(p.Bytes)/float64(pm.RSS))
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("RSS %s at +%s = %s", analyze.FormatBytes(pm.RSS), analyze.FormatDuration(at), strings.Join(parts, " + "))
}

// untracedKinds says what leakscope did not trace by call site, for the
// header: the memory of these is in the breakdown by mapping only; ""
// when it traced all of them (--maps and malloc).
func untracedKinds(c *analyze.Capture) string {
	var s []string
	if c.Probes != nil && !c.Probes.Malloc {
		s = append(s, "malloc family")
	}
	if c.Probes == nil || !slices.Contains(c.Probes.Kinds, string(analyze.KindMmapAnon)) {
		s = append(s, "mmap, thread stacks")
	}
	if len(s) == 0 {
		return ""
	}
	return strings.Join(s, ", ") + " (in the memory breakdown by mapping, not by call site)"
}

// v1Memory is process pid's latest breakdown in the JSON report; nil
// when the capture has none.
func v1Memory(r *analyze.Result, pid int) *V1Memory {
	c := r.Capture
	pm, at := c.LastMemory(pid)
	if pm == nil {
		return nil
	}
	m := &V1Memory{Pid: pm.Pid, AtSeconds: at.Seconds(), RSSBytes: pm.RSS, Parts: []V1MemoryPart{}, Untraced: untracedKinds(c)}
	for _, p := range pm.Parts {
		culprit, pool := partCulprit(r, p.Name, pid)
		m.Parts = append(m.Parts, V1MemoryPart{Name: p.Name, Bytes: p.Bytes, OutstandingBytes: p.Outstanding, Culprit: culprit, Pool: pool})
	}
	return m
}
