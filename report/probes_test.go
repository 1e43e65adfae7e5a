package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
)

// A capture traced without the malloc family says so in the text header
// and in JSON: a reader must know malloc leaks were not looked for.
func TestProbeSetInHeader(t *testing.T) {
	c := &analyze.Capture{
		Target: analyze.Target{Pid: 7, Command: []string{"java"}, Runtime: analyze.RuntimeJVM},
		Probes: &analyze.ProbeSet{Malloc: false, MallocReason: "--malloc auto: JVM target",
			Kinds: []string{"zlib.inflate", "zlib.deflate", "jvm.direct"}, ZlibBytes: "computed from each stream's init arguments (libz: zlib 1.2.13)"},
	}
	r := analyze.Rank(c, analyze.Options{})
	var text bytes.Buffer
	if err := Text(&text, r, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"probes:      zlib.inflate, zlib.deflate, jvm.direct; malloc family NOT traced (--malloc auto: JVM target): leaks of plain malloc are not looked for\n",
		"zlib bytes:  computed from each stream's init arguments (libz: zlib 1.2.13)\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text header lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var v V1
	if err := json.Unmarshal(js.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.Probes == nil || v.Probes.Malloc || v.Probes.MallocReason != "--malloc auto: JVM target" || len(v.Probes.Kinds) != 3 {
		t.Errorf("json probes = %+v", v.Probes)
	}

	c.Probes = &analyze.ProbeSet{Malloc: true, MallocReason: "--malloc auto", Kinds: []string{"zlib.inflate", "zlib.deflate"}}
	text.Reset()
	if err := Text(&text, analyze.Rank(c, analyze.Options{}), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "probes:      malloc family, zlib.inflate, zlib.deflate\n") || strings.Contains(text.String(), "zlib bytes") {
		t.Errorf("malloc on header:\n%s", text.String())
	}
}
