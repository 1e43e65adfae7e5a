package analyze

import (
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRule(t *testing.T) {
	tests := []struct {
		in    string
		want  []Cond
		canon string // r.String(); "" means in
	}{
		{in: "kind=zlib.*", want: []Cond{{Field: FieldKind, Op: "=", Glob: "zlib.*"}}},
		{in: "count>10", want: []Cond{{Field: FieldCount, Op: ">", N: 10}}},
		{in: "count>=0", want: []Cond{{Field: FieldCount, Op: ">=", N: 0}}},
		{in: "bytes>512", want: []Cond{{Field: FieldBytes, Op: ">", N: 512}}, canon: "bytes>512B"},
		{in: "bytes>1KiB", want: []Cond{{Field: FieldBytes, Op: ">", N: 1024}}},
		{in: "bytes>=1.5MiB", want: []Cond{{Field: FieldBytes, Op: ">=", N: 3 << 19}}, canon: "bytes>=1536KiB"},
		{in: "bytes>2gib", want: []Cond{{Field: FieldBytes, Op: ">", N: 2 << 30}}, canon: "bytes>2GiB"},
		{in: "bytes>0B", want: []Cond{{Field: FieldBytes, Op: ">", N: 0}}},
		{in: "age>5m", want: []Cond{{Field: FieldAge, Op: ">", Age: 5 * time.Minute}}, canon: "age>5m0s"},
		{in: "growth>10KiB/s", want: []Cond{{Field: FieldGrowth, Op: ">", N: 10 << 10}}},
		{in: "growth>=100/s", want: []Cond{{Field: FieldGrowth, Op: ">=", N: 100}}, canon: "growth>=100B/s"},
		{
			in: " kind = malloc , count > 3,bytes>= 1 MiB ,age>=90s, growth > 1 KiB/s",
			want: []Cond{
				{Field: FieldKind, Op: "=", Glob: "malloc"},
				{Field: FieldCount, Op: ">", N: 3},
				{Field: FieldBytes, Op: ">=", N: 1 << 20},
				{Field: FieldAge, Op: ">=", Age: 90 * time.Second},
				{Field: FieldGrowth, Op: ">", N: 1024},
			},
			canon: "kind=malloc,count>3,bytes>=1MiB,age>=1m30s,growth>1KiB/s",
		},
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.in)
		if err != nil {
			t.Errorf("ParseRule(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(r.Conds, tt.want) {
			t.Errorf("ParseRule(%q) = %+v, want %+v", tt.in, r.Conds, tt.want)
		}
		canon := tt.canon
		if canon == "" {
			canon = tt.in
		}
		if got := r.String(); got != canon {
			t.Errorf("ParseRule(%q).String() = %q, want %q", tt.in, got, canon)
		}
	}
}

func TestParseRuleErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `parse rule "": empty rule`},
		{"  ", `parse rule "  ": empty rule`},
		{"count>1,", `parse rule "count>1,": empty condition`},
		{"bytes", `parse rule "bytes": condition "bytes" has no comparison (use e.g. bytes>1MiB)`},
		{"size>1", `parse rule "size>1": unknown field "size" (use kind, count, bytes, age or growth)`},
		{"bytes>1XB", `parse rule "bytes>1XB": unknown size unit "XB" (use B, KiB, MiB or GiB)`},
		{"bytes>1KB", `parse rule "bytes>1KB": unknown size unit "KB" (use B, KiB, MiB or GiB)`},
		{"bytes>-1", `parse rule "bytes>-1": size "-1" is not a number with an optional unit, e.g. 64KiB`},
		{"bytes>.", `parse rule "bytes>.": size "." is not a number with an optional unit, e.g. 64KiB`},
		{"bytes>0.3KiB", `parse rule "bytes>0.3KiB": size "0.3KiB" is not a whole number of bytes`},
		{"bytes>16777216TiB", `parse rule "bytes>16777216TiB": unknown size unit "TiB" (use B, KiB, MiB or GiB)`},
		{"bytes>17179869184GiB", `parse rule "bytes>17179869184GiB": size "17179869184GiB" is too large`},
		{"bytes>1e30", `parse rule "bytes>1e30": unknown size unit "e30" (use B, KiB, MiB or GiB)`},
		{"bytes>", `parse rule "bytes>": bytes> needs a value`},
		{"bytes<1", `parse rule "bytes<1": bytes takes > or >=, not <`},
		{"bytes=1", `parse rule "bytes=1": bytes takes > or >=, not =`},
		{"count>1.5", `parse rule "count>1.5": count "1.5" is not a whole number`},
		{"age>5", `parse rule "age>5": age "5" is not a duration such as 90s or 5m`},
		{"age>-5s", `parse rule "age>-5s": age "-5s" is negative`},
		{"growth>1KiB", `parse rule "growth>1KiB": growth "1KiB" needs a rate per second, e.g. 1MiB/s`},
		{"kind>x", `parse rule "kind>x": kind takes =PATTERN, not >`},
		{"kind!=x", `parse rule "kind!=x": kind takes =PATTERN, not !=`},
		{"kind=", `parse rule "kind=": kind= needs a pattern`},
		{"kind=[", `parse rule "kind=[": kind pattern "[": syntax error in pattern`},
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseRule(%q) = %+v, %v\nwant error %s", tt.in, r, err, tt.want)
		}
	}
}

func TestRuleMatch(t *testing.T) {
	zlib := &Site{ID: 1, Kind: KindZlibInflate}
	heap := &Site{ID: 2, Kind: KindMalloc}
	leaks := []Leak{
		{Site: zlib, Count: 12, Bytes: 12 << 10, OldestAge: 10 * time.Minute, AgeKnown: true, Trend: &Trend{Growth: 2048}},
		{Site: heap, Count: 3, Bytes: 1 << 20}, // no ages, no trend
	}
	tests := []struct {
		rule string
		want []bool // per leak
	}{
		{"kind=zlib.*", []bool{true, false}},
		{"kind=*", []bool{true, true}},
		{"count>12", []bool{false, false}},
		{"count>=12", []bool{true, false}},
		{"count>2", []bool{true, true}},
		{"bytes>1MiB", []bool{false, false}},
		{"bytes>=1MiB", []bool{false, true}},
		{"age>9m", []bool{true, false}}, // unknown age never matches
		{"age>=10m", []bool{true, false}},
		{"age>10m", []bool{false, false}},
		{"age>=0s", []bool{true, false}},
		{"growth>1KiB/s", []bool{true, false}}, // no trend never matches
		{"growth>2KiB/s", []bool{false, false}},
		{"growth>=2KiB/s", []bool{true, false}},
		{"kind=zlib.*,count>100", []bool{false, false}},
		{"kind=malloc,bytes>512KiB", []bool{false, true}},
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.rule)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range leaks {
			if got := r.Match(l); got != tt.want[i] {
				t.Errorf("%q.Match(leak %d) = %v, want %v", tt.rule, i, got, tt.want[i])
			}
		}
	}
	if (Rule{}).Match(leaks[0]) {
		t.Error("an empty rule matched")
	}
}

func TestMatchRules(t *testing.T) {
	res := Rank(&Capture{Sites: []Site{
		{ID: 1, Kind: KindMalloc, LiveCount: 1, LiveBytes: 100},
		{ID: 2, Kind: KindZlibInflate, LiveCount: 5, LiveBytes: 5000},
		{ID: 3, Kind: KindMalloc, LiveCount: 9, LiveBytes: 900},
	}}, Options{})
	rules := []Rule{mustRule(t, "kind=malloc"), mustRule(t, "bytes>1KiB"), mustRule(t, "count>100")}
	ms := MatchRules(res, rules)
	type got struct {
		rule string
		id   uint64
	}
	var gs []got
	for _, m := range ms {
		gs = append(gs, got{m.Rule.String(), m.Leak.Site.ID})
		if m.Leak != &res.Leaks[m.Leak.Rank-1] {
			t.Errorf("match of site %d does not point into Result.Leaks", m.Leak.Site.ID)
		}
	}
	want := []got{{"kind=malloc", 3}, {"kind=malloc", 1}, {"bytes>1KiB", 2}}
	if !reflect.DeepEqual(gs, want) {
		t.Errorf("MatchRules = %+v, want %+v", gs, want)
	}
	if ms := MatchRules(res, nil); ms != nil {
		t.Errorf("MatchRules with no rules = %+v", ms)
	}
}

func mustRule(tb testing.TB, s string) Rule {
	tb.Helper()
	r, err := ParseRule(s)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// usable reports whether r is a rule ParseRule could have returned.
func usable(r Rule) bool {
	if len(r.Conds) == 0 {
		return false
	}
	for _, c := range r.Conds {
		switch c.Field {
		case FieldKind:
			if _, err := path.Match(c.Glob, ""); c.Op != "=" || c.Glob == "" || err != nil {
				return false
			}
		case FieldCount, FieldBytes, FieldGrowth, FieldAge:
			if c.Op != ">" && c.Op != ">=" || c.Age < 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// FuzzParseRule checks that ParseRule returns a usable rule exactly when it
// returns no error, and that String round-trips.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"kind=zlib.*", "count>10", "bytes>=1.5MiB", "age>5m", "growth>10KiB/s",
		"kind=malloc,count>3,bytes>=1MiB,age>=1m30s,growth>1KiB/s",
		"bytes>1XB", "", ",", "kind=[", "age>-1s", "bytes>18446744073709551615",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if (err == nil) != usable(r) {
			t.Fatalf("ParseRule(%q) = %+v, %v: want a usable rule exactly when there is no error", s, r, err)
		}
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil {
			t.Fatalf("ParseRule(%q) (String of %q): %v", r.String(), s, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("ParseRule(%q) = %+v, want %+v (from %q)", r.String(), again, r, s)
		}
		r.Match(Leak{Site: &Site{Kind: KindMalloc}, Trend: &Trend{}})
	})
}

// A rule that could never match fails loudly: a kind pattern with
// another condition glued on, or a kind no probe traced.
func TestRuleKindsChecked(t *testing.T) {
	for _, bad := range []string{"kind=malloc;count>0", "kind=malloc count>0", "kind=zlib.*>0"} {
		if _, err := ParseRule(bad); err == nil || !strings.Contains(err.Error(), "conditions are separated by ','") {
			t.Errorf("ParseRule(%q) = %v, want the separator explained", bad, err)
		}
	}
	c := &Capture{
		Probes: &ProbeSet{Malloc: true, Kinds: []string{"zlib.inflate", "zlib.deflate", "jvm.direct (JNI fallback in libzip.so)"}},
		Sites:  []Site{{Kind: "stdio"}},
	}
	if got, want := TracedKinds(c), []string{"jvm.direct", "malloc", "stdio", "zlib.deflate", "zlib.inflate"}; !slices.Equal(got, want) {
		t.Errorf("TracedKinds = %q, want %q", got, want)
	}
	for spec, ok := range map[string]bool{
		"kind=malloc,count>0": true, "kind=zlib.*": true, "kind=jvm.direct": true, "kind=stdio": true, "count>0": true,
		"kind=maloc": false, "kind=zlib": false, "bytes>1,kind=openssl.*": false,
	} {
		r, err := ParseRule(spec)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckRuleKinds([]Rule{r}, c)
		if (err == nil) != ok {
			t.Errorf("CheckRuleKinds(%q) = %v, want ok %v", spec, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "matches none of the kinds traced (jvm.direct, malloc, stdio, zlib.deflate, zlib.inflate)") {
			t.Errorf("CheckRuleKinds(%q) = %v", spec, err)
		}
	}
	// Nothing known of what was traced: not checked.
	r, _ := ParseRule("kind=maloc")
	if err := CheckRuleKinds([]Rule{r}, &Capture{}); err != nil {
		t.Errorf("an empty capture: %v", err)
	}
}
