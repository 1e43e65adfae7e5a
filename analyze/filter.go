package analyze

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Grouping says which sites Rank merges into one leak.
type Grouping string

// Groupings Options.GroupBy takes.
const (
	// GroupByStack keeps one leak per site, that is per call stack and
	// kind. The empty Grouping means the same.
	GroupByStack Grouping = "stack"
	// GroupByFrame merges the sites of one kind whose first frame outside
	// allocators and runtimes (Culprit) is the same.
	GroupByFrame Grouping = "frame"
)

// ParseFilter compiles expr, the regular expression given to the filter
// flag named flag (e.g. "--focus"), for Options.Focus or Options.Ignore.
// Like pprof's, the expression is not anchored: "parse" matches
// "parse_request". The error names the flag and the expression:
//
//	--focus "(": error parsing regexp: missing closing ): `(`
func ParseFilter(flag, expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, expr, err)
	}
	return re, nil
}

// allocatorFrames are the functions Culprit looks past first, each a regular
// expression matched against a frame's whole function name: allocators and
// the wrappers around them, and runtimes' own frames, which many unrelated
// call stacks share. Keep docs/json-report.md in step.
var allocatorFrames = []string{
	// The C allocator (also under glibc's internal names) and its wrappers.
	`(__libc_|__GI___libc_|__GI_)?(malloc|calloc|realloc|reallocarray|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|strdup|strndup)`,
	`_int_(malloc|realloc|memalign|free)`,
	`x(malloc|calloc|realloc|reallocarray|zalloc|strdup|strndup|memdup)`,
	`g_(try_)?(malloc0?|realloc)(_n)?`,
	`g_(strdup|strndup|memdup2?|slice_alloc0?)`,
	`CRYPTO_(\w*alloc|strn?dup|memdup)`,
	// zlib's allocation hook and the init functions that wrap inflateInit2_
	// and deflateInit2_.
	`zcalloc`,
	`(inflate|deflate)Init2?_`,
	// C++ operator new (demangled or not) and standard allocators.
	`operator new(\[\])?(\(.*)?`,
	`_Zn[wa].*`,
	`(std|__gnu_cxx)::.*allocator.*::allocate(\(.*)?`,
	// HotSpot: its malloc wrappers, Unsafe.allocateMemory (direct
	// buffers) and the template interpreter, whose frames are not named.
	`os::(malloc|realloc)(\(.*)?`,
	`(AllocateHeap|ReallocateHeap)(\(.*)?`,
	`Unsafe_(Allocate|Reallocate)Memory0`,
	`\[interpreted\]`,
	// The Go runtime and cgo's generated call stubs.
	`runtime\..*`,
	`_cgo_.*`,
	`x_cgo_.*`,
	`crosscall2`,
	`.*\._Cfunc_.*`,
	`.*\._cgo_.*`,
}

var allocatorFrame = regexp.MustCompile(`^(?:` + strings.Join(allocatorFrames, "|") + `)$`)

// frameName is what Focus and Ignore match: the frame's function, or the
// base name of its module when no symbol covers it ("" for neither).
func frameName(f Frame) string {
	if f.Function != "" || f.Module == "" {
		return f.Function
	}
	return path.Base(f.Module)
}

// groupLabel names the frame a group is keyed by: the function, or the
// module's base name and offset when no symbol covers it, so that two
// unnamed functions of one object stay apart.
func groupLabel(f Frame) string {
	switch {
	case f.Function != "":
		return f.Function
	case f.Module != "":
		return path.Base(f.Module) + "+0x" + strconv.FormatUint(f.Offset, 16)
	}
	return "0x" + strconv.FormatUint(f.Address, 16)
}

// filters reports whether o filters or groups sites.
func (o Options) filters() bool {
	return len(o.Kinds) > 0 || o.Focus != nil || o.Ignore != nil || o.GroupBy == GroupByFrame
}

// Filters describes the filters and grouping of o, as in `kind zlib.*,
// focus "parse", grouped by frame`; "" when o has none.
func (o Options) Filters() string {
	var fs []string
	if len(o.Kinds) > 0 {
		fs = append(fs, "kind "+strings.Join(o.Kinds, " or "))
	}
	if o.Focus != nil {
		fs = append(fs, fmt.Sprintf("focus %q", o.Focus.String()))
	}
	if o.Ignore != nil {
		fs = append(fs, fmt.Sprintf("ignore %q", o.Ignore.String()))
	}
	if o.GroupBy == GroupByFrame {
		fs = append(fs, "grouped by frame")
	}
	return strings.Join(fs, ", ")
}

// keep reports whether s passes o's kind, focus and ignore filters.
func (o Options) keep(s *Site) bool {
	if len(o.Kinds) > 0 && !slices.ContainsFunc(o.Kinds, func(glob string) bool {
		ok, _ := path.Match(glob, string(s.Kind))
		return ok
	}) {
		return false
	}
	matches := func(re *regexp.Regexp) func(*Frame) bool {
		return func(f *Frame) bool { return re.MatchString(frameName(*f)) }
	}
	if o.Focus != nil && !slices.ContainsFunc(s.Stack.Frames, matches(o.Focus)) {
		return false
	}
	return o.Ignore == nil || !slices.ContainsFunc(s.Stack.Frames, matches(o.Ignore))
}

// filter returns c as o's filters and grouping leave it, and the reason to
// add to each merged site, by site ID. Without filters or grouping it
// returns c itself; otherwise a copy holding only the sites kept (merged by
// GroupBy) and snapshots that list only those. c is never modified.
func filter(c *Capture, o Options) (*Capture, map[uint64]string) {
	if !o.filters() {
		return c, nil
	}
	out := *c
	// Appending a warning to the copy must not write into c's array.
	out.Warnings = slices.Clip(c.Warnings)
	into := map[uint64]uint64{} // ID of a kept site to the ID it is listed under
	var notes map[uint64]string
	if o.GroupBy == GroupByFrame {
		out.Sites, notes = group(c, o, into)
	} else {
		out.Sites = []Site{}
		for i := range c.Sites {
			if s := &c.Sites[i]; o.keep(s) {
				out.Sites = append(out.Sites, *s)
				into[s.ID] = s.ID
			}
		}
	}
	if c.Snapshots != nil {
		out.Snapshots = make([]Snapshot, len(c.Snapshots))
	}
	for j, s := range c.Snapshots {
		snap := Snapshot{At: s.At, Sites: []SitePoint{}}
		at := map[uint64]int{} // listed ID to its index in snap.Sites
		for _, p := range s.Sites {
			id, ok := into[p.ID]
			if !ok {
				continue
			}
			k, ok := at[id]
			if !ok {
				at[id] = len(snap.Sites)
				p.ID = id
				snap.Sites = append(snap.Sites, p)
				continue
			}
			q := &snap.Sites[k]
			q.LiveCount += p.LiveCount
			q.LiveBytes += p.LiveBytes
			q.Allocs += p.Allocs
			q.Frees += p.Frees
		}
		out.Snapshots[j] = snap
	}
	return &out, notes
}

// group merges the sites o keeps that share a kind and a Culprit, in
// order of their first member, and records in into under which ID each
// kept site is now listed. A merged site has the ID, kind and stack of its
// largest member (by live bytes, then live count, then lowest ID), the
// sums of its members' totals and their live allocations. When a member
// holds live allocations without their ages, the merged site lists none,
// so it is counted by its totals, as a site without ages is. A site with no
// Culprit stays alone. The notes say, per merged site ID, "N stacks
// grouped by FRAME".
func group(c *Capture, o Options, into map[uint64]uint64) ([]Site, map[uint64]string) {
	sites := c.Sites
	type key struct {
		kind  Kind
		frame string
		pid   int    // one group per process
		alone uint64 // the site's ID when it has no group frame
	}
	var keys []key
	members := map[key][]*Site{}
	culprits := NewCulprits(o.CulpritSkip).In(c)
	for i := range sites {
		s := &sites[i]
		if !o.keep(s) {
			continue
		}
		k := key{kind: s.Kind, alone: s.ID}
		if f, ok := culprits.FindSite(s); ok {
			k = key{kind: s.Kind, frame: groupLabel(f), pid: s.Pid}
		}
		if _, ok := members[k]; !ok {
			keys = append(keys, k)
		}
		members[k] = append(members[k], s)
	}
	out := make([]Site, 0, len(keys))
	notes := map[uint64]string{}
	for _, k := range keys {
		ms := members[k]
		largest := slices.MaxFunc(ms, func(a, b *Site) int {
			return cmp.Or(
				cmp.Compare(a.LiveBytes, b.LiveBytes),
				cmp.Compare(a.LiveCount, b.LiveCount),
				cmp.Compare(b.ID, a.ID),
			)
		})
		if len(ms) == 1 {
			out = append(out, *largest)
			into[largest.ID] = largest.ID
			continue
		}
		m := Site{ID: largest.ID, Kind: k.kind, Stack: largest.Stack, Pid: k.pid}
		ages := true
		var files map[string]*MappedFile
		for _, s := range ms {
			for _, f := range s.Files {
				if files == nil {
					files = map[string]*MappedFile{}
				}
				if g := files[f.Path]; g != nil {
					g.Count += f.Count
					g.Bytes += f.Bytes
				} else {
					files[f.Path] = &MappedFile{Path: f.Path, Count: f.Count, Bytes: f.Bytes}
				}
			}
			m.LiveCount += s.LiveCount
			m.LiveBytes += s.LiveBytes
			m.Allocs += s.Allocs
			m.Frees += s.Frees
			ages = ages && (len(s.Live) > 0 || s.LiveCount == 0)
			into[s.ID] = m.ID
		}
		if ages {
			weights := false
			for _, s := range ms {
				m.Live = append(m.Live, s.Live...)
				weights = weights || s.LiveWeights != nil
			}
			if weights { // each allocation keeps its weight, 0 where none
				m.LiveWeights = make([]float64, 0, len(m.Live))
				for _, s := range ms {
					for i := range s.Live {
						m.LiveWeights = append(m.LiveWeights, s.Weight(i))
					}
				}
			}
		}
		if files != nil {
			m.Files = SortFiles(files)
		}
		out = append(out, m)
		notes[m.ID] = fmt.Sprintf("%d stacks grouped by %s", len(ms), k.frame)
	}
	return out, notes
}
