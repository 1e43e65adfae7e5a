package analyze

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Field names what a rule condition tests.
type Field string

// Fields a condition can test. Each reads one Leak field; see Cond.
const (
	FieldKind   Field = "kind"   // Site.Kind, against a path.Match pattern
	FieldCount  Field = "count"  // Leak.Count, live allocations
	FieldBytes  Field = "bytes"  // Leak.Bytes
	FieldAge    Field = "age"    // Leak.OldestAge
	FieldGrowth Field = "growth" // Leak.Trend.Growth, bytes per second
)

// Cond is one condition of a rule, such as "bytes>1MiB".
type Cond struct {
	Field Field
	// Op is "=" for FieldKind, and ">" or ">=" for every other field.
	Op string
	// Glob is the path.Match pattern of FieldKind.
	Glob string
	// N is the bound of FieldCount (allocations), FieldBytes (bytes) and
	// FieldGrowth (bytes per second).
	N uint64
	// Age is the bound of FieldAge; never negative.
	Age time.Duration
}

// Rule is a CI gate: a leak matches when it meets every one of Conds.
// ParseRule builds one from text such as "kind=zlib.*,count>10,age>1m".
type Rule struct {
	Conds []Cond // at least one
}

// RuleMatch is one leak that met a rule.
type RuleMatch struct {
	Rule Rule
	Leak *Leak // points into Result.Leaks
}

// Size units a rule accepts, largest first for String.
var sizeUnits = []struct {
	name string
	n    uint64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseRule parses a comma-separated list of conditions, all of which a
// leak must meet:
//
//	kind=GLOB        the kind matches GLOB (path.Match), e.g. kind=zlib.*
//	count>N          more than N live allocations
//	bytes>SIZE       more than SIZE live bytes; SIZE is a number with an
//	                 optional unit B, KiB, MiB or GiB, e.g. 1.5MiB
//	age>DURATION     the oldest live allocation is older (time.ParseDuration)
//	growth>SIZE/s    live bytes grow faster, e.g. growth>10KiB/s
//
// Every comparison also takes >=. Spaces around conditions and values are
// ignored.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(s)
	if err != nil {
		return Rule{}, fmt.Errorf("parse rule %q: %w", s, err)
	}
	return r, nil
}

func parseRule(s string) (Rule, error) {
	if strings.TrimSpace(s) == "" {
		return Rule{}, errors.New("empty rule")
	}
	var r Rule
	for part := range strings.SplitSeq(s, ",") {
		c, err := parseCond(strings.TrimSpace(part))
		if err != nil {
			return Rule{}, err
		}
		r.Conds = append(r.Conds, c)
	}
	return r, nil
}

// kindRune reports whether r may appear in a kind pattern: a kind's
// letters, digits, '.', '_' and '-', and path.Match's *, ?, [, ], ^.
func kindRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-*?[]^", r)
}

// CheckRuleKinds fails when a rule's kind pattern matches no kind the
// capture traced: the rule could never match, and a gate built on it
// would pass whatever leaked (a typo such as kind=maloc). A capture that
// does not say what it traced (no ProbeSet, no site) is not checked.
func CheckRuleKinds(rules []Rule, c *Capture) error {
	kinds := TracedKinds(c)
	if len(kinds) == 0 {
		return nil
	}
	for _, r := range rules {
		for _, cond := range r.Conds {
			if cond.Field != FieldKind {
				continue
			}
			matched := false
			for _, k := range kinds {
				if ok, _ := path.Match(cond.Glob, k); ok {
					matched = true
					break
				}
			}
			if !matched {
				return fmt.Errorf("rule %q: kind=%s matches none of the kinds traced (%s), so it could never fail: a typo?",
					r.String(), cond.Glob, strings.Join(kinds, ", "))
			}
		}
	}
	return nil
}

// TracedKinds lists the kinds a capture traced: malloc when it was
// probed, the resource kinds of its probe set, and every kind of its
// sites; sorted, without repeats.
func TracedKinds(c *Capture) []string {
	var kinds []string
	if p := c.Probes; p != nil {
		if p.Malloc {
			kinds = append(kinds, string(KindMalloc))
		}
		for _, k := range p.Kinds {
			k, _, _ = strings.Cut(k, " ") // "jvm.direct (JNI fallback in …)"
			kinds = append(kinds, k)
		}
	}
	for i := range c.Sites {
		kinds = append(kinds, string(c.Sites[i].Kind))
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

func parseCond(s string) (Cond, error) {
	if s == "" {
		return Cond{}, errors.New("empty condition")
	}
	i := strings.IndexAny(s, "=<>!")
	if i < 0 {
		return Cond{}, fmt.Errorf("condition %q has no comparison (use e.g. bytes>1MiB)", s)
	}
	c := Cond{Field: Field(strings.TrimSpace(s[:i]))}
	op, value := s[i:i+1], s[i+1:]
	if strings.HasPrefix(value, "=") && op != "=" {
		op, value = op+"=", value[1:]
	}
	c.Op, value = op, strings.TrimSpace(value)

	switch c.Field {
	case FieldKind:
		if c.Op != "=" {
			return Cond{}, fmt.Errorf("kind takes =PATTERN, not %s", c.Op)
		}
		if value == "" {
			return Cond{}, errors.New("kind= needs a pattern")
		}
		if _, err := path.Match(value, ""); err != nil {
			return Cond{}, fmt.Errorf("kind pattern %q: %w", value, err)
		}
		if i := strings.IndexFunc(value, func(r rune) bool { return !kindRune(r) }); i >= 0 {
			return Cond{}, fmt.Errorf("kind pattern %q holds %q, which no kind has (conditions are separated by ',', e.g. kind=malloc,count>0)", value, value[i:i+1])
		}
		c.Glob = value
		return c, nil
	case FieldCount, FieldBytes, FieldAge, FieldGrowth:
	default:
		return Cond{}, fmt.Errorf("unknown field %q (use kind, count, bytes, age or growth)", c.Field)
	}
	if c.Op != ">" && c.Op != ">=" {
		return Cond{}, fmt.Errorf("%s takes > or >=, not %s", c.Field, c.Op)
	}
	if value == "" {
		return Cond{}, fmt.Errorf("%s%s needs a value", c.Field, c.Op)
	}
	var err error
	switch c.Field {
	case FieldCount:
		if c.N, err = strconv.ParseUint(value, 10, 64); err != nil {
			return Cond{}, fmt.Errorf("count %q is not a whole number", value)
		}
	case FieldBytes:
		c.N, err = parseSize(value)
	case FieldGrowth:
		size, ok := strings.CutSuffix(value, "/s")
		if !ok {
			return Cond{}, fmt.Errorf("growth %q needs a rate per second, e.g. 1MiB/s", value)
		}
		c.N, err = parseSize(strings.TrimSpace(size))
	case FieldAge:
		if c.Age, err = time.ParseDuration(value); err != nil {
			return Cond{}, fmt.Errorf("age %q is not a duration such as 90s or 5m", value)
		}
		if c.Age < 0 {
			return Cond{}, fmt.Errorf("age %q is negative", value)
		}
	}
	return c, err
}

// parseSize reads a byte count such as "512", "64KiB" or "1.5 MiB".
// ParseSize reads a byte size: a number with an optional unit B, KiB, MiB
// or GiB ("512KiB", "1.5MiB").
func ParseSize(s string) (uint64, error) { return parseSize(s) }

func parseSize(s string) (uint64, error) {
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	digits, unit := s[:i], strings.TrimSpace(s[i:])
	if digits == "" {
		return 0, fmt.Errorf("size %q is not a number with an optional unit, e.g. 64KiB", s)
	}
	mult := uint64(0)
	for _, u := range sizeUnits {
		if strings.EqualFold(unit, u.name) {
			mult = u.n
		}
	}
	if unit == "" {
		mult = 1
	}
	if mult == 0 {
		return 0, fmt.Errorf("unknown size unit %q (use B, KiB, MiB or GiB)", unit)
	}
	if n, err := strconv.ParseUint(digits, 10, 64); err == nil {
		if n > math.MaxUint64/mult {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(digits, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q is not a number with an optional unit, e.g. 64KiB", s)
	}
	v := f * float64(mult)
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return uint64(v), nil
}

// formatSize renders n in the largest unit that divides it exactly, so
// parseSize reads back the same number.
func formatSize(n uint64) string {
	for _, u := range sizeUnits {
		if n != 0 && n%u.n == 0 {
			return strconv.FormatUint(n/u.n, 10) + u.name
		}
	}
	return "0B"
}

// String renders the condition as ParseRule reads it.
func (c Cond) String() string {
	v := ""
	switch c.Field {
	case FieldKind:
		v = c.Glob
	case FieldCount:
		v = strconv.FormatUint(c.N, 10)
	case FieldBytes:
		v = formatSize(c.N)
	case FieldGrowth:
		v = formatSize(c.N) + "/s"
	case FieldAge:
		v = c.Age.String()
	}
	return string(c.Field) + c.Op + v
}

// String renders the rule as ParseRule reads it.
func (r Rule) String() string {
	s := make([]string, len(r.Conds))
	for i, c := range r.Conds {
		s[i] = c.String()
	}
	return strings.Join(s, ",")
}

// Match reports whether l meets every condition of r. A condition on what
// l does not know fails: age without per-allocation ages (l.AgeKnown) and
// growth without a trend (l.Trend).
func (r Rule) Match(l Leak) bool {
	if len(r.Conds) == 0 || l.Verdict.Class == ClassRuntime {
		return false
	}
	for _, c := range r.Conds {
		if !c.match(l) {
			return false
		}
	}
	return true
}

func (c Cond) match(l Leak) bool {
	switch c.Field {
	case FieldKind:
		ok, _ := path.Match(c.Glob, string(l.Site.Kind))
		return ok
	case FieldCount:
		return exceeds(c.Op, l.Count, c.N)
	case FieldBytes:
		return exceeds(c.Op, l.Bytes, c.N)
	case FieldAge:
		return l.AgeKnown && exceeds(c.Op, l.OldestAge, c.Age)
	case FieldGrowth:
		return l.Trend != nil && exceeds(c.Op, l.Trend.Growth, float64(c.N))
	}
	return false
}

// exceeds reports whether v > bound, or v >= bound when op is ">=".
func exceeds[T cmp.Ordered](op string, v, bound T) bool {
	if op == ">=" {
		return v >= bound
	}
	return v > bound
}

// MatchRules returns every leak of res that meets a rule, by rule order and
// then rank. It sees only res.Leaks, so rank with Options.Top 0 for a gate
// that checks every site.
func MatchRules(res *Result, rules []Rule) []RuleMatch {
	var ms []RuleMatch
	for _, r := range rules {
		for i := range res.Leaks {
			if r.Match(res.Leaks[i]) {
				ms = append(ms, RuleMatch{Rule: r, Leak: &res.Leaks[i]})
			}
		}
	}
	return ms
}
