package track

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePair(t *testing.T) {
	got, err := Parse("pool.conn=libpool.so:pool_get/ret+pool_clone/out2:pool_put")
	if err != nil {
		t.Fatal(err)
	}
	want := []Pair{{
		Kind: "pool.conn", Library: "libpool.so",
		Acquire: []Call{{"pool_get", Handle{Kind: Ret}, 0}, {"pool_clone", Handle{Out, 2}, 0}},
		Release: []Call{{"pool_put", Handle{Arg, 1}, 0}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if s := got[0].String(); s != "pool.conn=libpool.so:pool_get/ret+pool_clone/out2:pool_put/arg1" {
		t.Errorf("String() = %q", s)
	}
}

func TestParsePresets(t *testing.T) {
	got, err := Parse("preset:stdio,preset:dirent,preset:zlib")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, p := range got {
		if !p.Optional || p.Preset == "" {
			t.Errorf("%s: preset pairs are optional", p.Kind)
		}
		kinds = append(kinds, p.Kind)
	}
	if strings.Join(kinds, ",") != "stdio.file,dirent.dir" {
		t.Errorf("kinds %v", kinds)
	}
	for _, name := range Presets() {
		ps, err := PresetPairs(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if err := p.Validate(); err != nil {
				t.Errorf("preset %s: %v", name, err)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"pool":                              "want KIND=LIBRARY:ACQUIRE:RELEASE",
		"pool=libp.so:get":                  "got 2 part(s)",
		"pool=libp.so:get/arg9:put":         "argument index must be 1 to 6",
		"pool=libp.so:get/xyz:put":          "use ret, argN, outN or reopenN",
		"pool=libp.so:get:put/ret":          "a release finds its handle in an argument",
		"pool=:get:put":                     "no library",
		"malloc=libc.so:malloc:free":        "is built in",
		"po ol=libp.so:get:put":             "kind \"po ol\"",
		"pool=libp.so:get;rm -rf:put":       "is not a symbol name",
		"preset:nosuch":                     `unknown preset "nosuch"`,
		"preset:stdio,pool=libp.so:get:put": "mix of presets and a pair",
		"pool=libp.so:get/out0:put":         "argument index must be 1 to 6",
		"pool=libp.so:get:put/reopen1":      "use argN",
	} {
		_, err := Parse(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", spec, err, want)
		}
	}
}

func TestParseFile(t *testing.T) {
	yamlSpec := `
presets: [dirent]
pairs:
  - kind: pool.conn
    library: libpool.so
    acquire: [{function: pool_get}, {function: pool_open, handle: out1}]
    release: [{function: pool_put, handle: arg2}]
`
	got, err := ParseFile([]byte(yamlSpec))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Acquire[1].Handle != (Handle{Out, 1}) || got[1].Release[0].Handle != (Handle{Arg, 2}) || got[1].Acquire[0].Handle.Kind != Ret {
		t.Errorf("got %+v", got)
	}
	jsonSpec := `{"pairs":[{"kind":"k","library":"*","acquire":[{"function":"a"}],"release":[{"function":"r"}]}]}`
	if _, err := ParseFile([]byte(jsonSpec)); err != nil {
		t.Errorf("JSON: %v", err)
	}
	for spec, want := range map[string]string{
		"pairs: [{kind: k, library: l, acquire: [{function: a}], release: [{function: r}], colour: red}]": "colour",
		"pairs: []":          "no presets and no pairs",
		"presets: [nosuch]":  "unknown preset",
		"pairs: [{kind: k}]": "no library",
		"{{{":                "parse track file",
	} {
		if _, err := ParseFile([]byte(spec)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFile(%q) = %v, want %q", spec, err, want)
		}
	}
}

func TestMatchesLibrary(t *testing.T) {
	p := Pair{Library: "libbz2.so"}
	if !p.MatchesLibrary("/usr/lib/x86_64-linux-gnu/libbz2.so.1.0.4") || p.MatchesLibrary("/usr/lib/libz.so.1") {
		t.Error("prefix match")
	}
	p.Library = "/opt/x/libq.so"
	if !p.MatchesLibrary("/opt/x/libq.so") || p.MatchesLibrary("/opt/y/libq.so") {
		t.Error("path match")
	}
}

// FuzzParse: a spec parses to valid pairs or gives an error, and a parsed
// pair renders back to a spec that parses to the same pair.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"pool.conn=libpool.so:pool_get/ret+pool_clone/out2:pool_put/arg1", "preset:stdio,preset:bzip2", "k=*:a/reopen3:r", "x=y:z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		ps, err := Parse(spec)
		if err != nil {
			if ps != nil {
				t.Fatalf("pairs and error")
			}
			return
		}
		for _, p := range ps {
			if p.Preset != "" {
				continue
			}
			if err := p.Validate(); err != nil {
				t.Fatalf("parsed invalid pair %+v: %v", p, err)
			}
			again, err := Parse(p.String())
			if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0], p) {
				t.Fatalf("round trip of %q: %+v, %v", p.String(), again, err)
			}
		}
	})
}
