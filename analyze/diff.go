package analyze

import (
	"cmp"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Held is what a site holds at the end of a capture.
type Held struct {
	Count, Bytes uint64 // live allocations and their bytes
}

// SiteDiff is one allocation site as two captures see it.
type SiteDiff struct {
	Kind Kind
	// Stack names the site's frames, leaf first: the function, or for a
	// frame without one, module base name+offset, which do not change
	// between runs of the same binaries (addresses do).
	Stack    []string
	Old, New Held // zero when the capture lacks the site
}

// CountDelta is New.Count − Old.Count, saturated to int64's range.
func (d SiteDiff) CountDelta() int64 { return delta64(d.New.Count, d.Old.Count) }

// BytesDelta is New.Bytes − Old.Bytes, saturated to int64's range.
func (d SiteDiff) BytesDelta() int64 { return delta64(d.New.Bytes, d.Old.Bytes) }

// delta64 is a − b, saturated: counts from a capture file may be anything.
func delta64(a, b uint64) int64 {
	if a >= b {
		return int64(min(a-b, math.MaxInt64))
	}
	return -int64(min(b-a, math.MaxInt64))
}

// DiffResult sorts the sites of two captures by what changed. Each list is
// ordered by the size of the byte change, largest first, then by kind and
// stack.
type DiffResult struct {
	Old, New *Capture
	Fixed    []SiteDiff // held memory in Old, nothing in New
	Added    []SiteDiff // held nothing in Old (or was absent), holds memory in New
	Changed  []SiteDiff // holds memory in both, a different count or size
	// Unchanged counts sites holding exactly the same in both.
	Unchanged int
}

// Diff compares two captures, typically of the same program before and
// after a fix. Sites match by kind and the function names of their stacks,
// since addresses differ between runs; sites of one capture that share
// both (e.g. two call sites in one function) are added together. Only live
// totals at the end of each capture are compared.
func Diff(old, new *Capture) *DiffResult {
	byKey := map[string]*SiteDiff{}
	var order []string
	add := func(s Site, isNew bool) {
		stack := frameNames(s.Stack)
		key := string(s.Kind) + "\x00" + strings.Join(stack, "\x00")
		d, ok := byKey[key]
		if !ok {
			d = &SiteDiff{Kind: s.Kind, Stack: stack}
			byKey[key] = d
			order = append(order, key)
		}
		h := &d.Old
		if isNew {
			h = &d.New
		}
		h.Count += s.LiveCount
		h.Bytes += s.LiveBytes
	}
	for _, s := range old.Sites {
		add(s, false)
	}
	for _, s := range new.Sites {
		add(s, true)
	}
	r := &DiffResult{Old: old, New: new}
	for _, k := range order {
		d := *byKey[k]
		switch {
		case d.Old.Count == 0 && d.New.Count == 0:
		case d.New.Count == 0:
			r.Fixed = append(r.Fixed, d)
		case d.Old.Count == 0:
			r.Added = append(r.Added, d)
		case d.Old != d.New:
			r.Changed = append(r.Changed, d)
		default:
			r.Unchanged++
		}
	}
	for _, l := range [][]SiteDiff{r.Fixed, r.Added, r.Changed} {
		slices.SortStableFunc(l, func(a, b SiteDiff) int {
			return cmp.Or(
				cmp.Compare(abs(b.BytesDelta()), abs(a.BytesDelta())),
				cmp.Compare(a.Kind, b.Kind),
				slices.Compare(a.Stack, b.Stack),
			)
		})
	}
	return r
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// frameNames names each frame of s in a way that survives a restart.
func frameNames(s Stack) []string {
	names := make([]string, len(s.Frames))
	for i, f := range s.Frames {
		switch {
		case f.Function != "":
			names[i] = f.Function
		case f.Module != "":
			names[i] = fmt.Sprintf("%s+0x%x", filepath.Base(f.Module), f.Offset)
		default:
			names[i] = "?"
		}
	}
	return names
}

// DiffMatch is one site of a diff that met a rule.
type DiffMatch struct {
	Rule Rule
	Site *SiteDiff // points into DiffResult.Added or Changed
}

// CheckDiffRules fails for a rule a diff cannot apply: a diff knows what
// each site holds at the end of two captures, not ages or rates.
func CheckDiffRules(rules []Rule) error {
	for _, r := range rules {
		for _, c := range r.Conds {
			if c.Field == FieldAge || c.Field == FieldGrowth {
				return fmt.Errorf("rule %q: diff compares what sites hold at the end of two captures; it takes kind, count and bytes, not %s", r.String(), c.Field)
			}
		}
	}
	return nil
}

// MatchDiffRules returns the new and grown sites that meet a rule, by rule
// order, then new before changed, in each list's order. A site is tested
// by its growth: count and bytes are New minus Old (a new site's whole
// holding); a site that shrank or held as much is never tested.
func MatchDiffRules(d *DiffResult, rules []Rule) []DiffMatch {
	var ms []DiffMatch
	for _, r := range rules {
		for _, list := range [][]SiteDiff{d.Added, d.Changed} {
			for i := range list {
				sd := &list[i]
				if sd.CountDelta() <= 0 && sd.BytesDelta() <= 0 {
					continue
				}
				if r.matchGrowth(sd) {
					ms = append(ms, DiffMatch{Rule: r, Site: sd})
				}
			}
		}
	}
	return ms
}

// matchGrowth applies the rule to what a site gained between captures.
func (r Rule) matchGrowth(sd *SiteDiff) bool {
	if len(r.Conds) == 0 {
		return false
	}
	for _, c := range r.Conds {
		ok := false
		switch c.Field {
		case FieldKind:
			ok, _ = path.Match(c.Glob, string(sd.Kind))
		case FieldCount:
			ok = sd.CountDelta() > 0 && exceeds(c.Op, uint64(sd.CountDelta()), c.N)
		case FieldBytes:
			ok = sd.BytesDelta() > 0 && exceeds(c.Op, uint64(sd.BytesDelta()), c.N)
		}
		if !ok {
			return false
		}
	}
	return true
}
