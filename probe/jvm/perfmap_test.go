package jvm

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestJavaName(t *testing.T) {
	tests := []struct {
		raw  string
		name string
		kind Kind
	}{
		{"void java.util.zip.Inflater.<init>(boolean)", "java.util.zip.Inflater.<init>", KindMethod},
		{"long java.util.zip.Inflater.init(boolean)", "java.util.zip.Inflater.init", KindMethod},
		{"void java.util.zip.GZIPInputStream.<init>(java.io.InputStream, int)", "java.util.zip.GZIPInputStream.<init>", KindMethod},
		{"java.lang.Object[] java.util.ArrayList.toArray()", "java.util.ArrayList.toArray", KindMethod},
		{"long KafkaRecovery.recoverSegment(byte[], boolean)", "KafkaRecovery.recoverSegment", KindMethod},
		{"java.lang.Object java.lang.invoke.LambdaForm$MH/0x0000000800c01000.invoke(java.lang.Object)",
			"java.lang.invoke.LambdaForm$MH/0x0000000800c01000.invoke", KindMethod},
		{"Ljava/util/zip/Inflater;::<init>", "java.util.zip.Inflater.<init>", KindMethod},
		{"Ljava/util/zip/Inflater;.<init>(Z)V", "java.util.zip.Inflater.<init>", KindMethod},
		{"Interpreter", Interpreted, KindInterpreter},
		{"StubRoutines (1)", "StubRoutines (1)", KindStub},
		{"I2C/C2I adapters(0xbbeebbeb)", "I2C/C2I adapters(0xbbeebbeb)", KindStub},
		{"native signature handlers", "native signature handlers", KindStub},
		{"_new_array_Java", "_new_array_Java", KindStub},
		{"L", "L", KindStub},
	}
	for _, tt := range tests {
		name, kind := javaName(tt.raw)
		if name != tt.name || kind != tt.kind {
			t.Errorf("javaName(%q) = %q, %d; want %q, %d", tt.raw, name, kind, tt.name, tt.kind)
		}
	}
}

func TestParsePerfMapJDK17(t *testing.T) {
	data, err := os.ReadFile("testdata/jdk17.map")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParsePerfMap(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != bytes.Count(data, []byte("\n")) {
		t.Errorf("%d symbols from %d lines", m.Len(), bytes.Count(data, []byte("\n")))
	}
	byName := map[string]Symbol{}
	for _, s := range m.syms {
		byName[s.Name] = s
	}
	for _, want := range []string{"java.util.zip.Inflater.init", "java.util.zip.Inflater.<init>",
		"java.util.zip.GZIPInputStream.<init>", "KafkaRecovery.recoverSegment", Interpreted, "StubRoutines (1)"} {
		s, ok := byName[want]
		if !ok {
			t.Errorf("no symbol %s", want)
			continue
		}
		for _, addr := range []uint64{s.Start, s.Start + s.Size/2, s.End() - 1} {
			if got, ok := m.Lookup(addr); !ok || got.Name != want {
				t.Errorf("Lookup(%#x) = %q, %v; want %s", addr, got.Name, ok, want)
			}
		}
	}
	if _, ok := m.Lookup(0x1000); ok {
		t.Error("Lookup of an address below every symbol succeeded")
	}
}

func TestPerfMapLookupNested(t *testing.T) {
	m, err := ParsePerfMap(strings.NewReader(
		"1000 100 outer blob\n" +
			"1040 10 inner stub\n" +
			"0x2000 0x10 void a.B.c()\n" +
			"2010 0 empty\n" +
			"1040 10 inner twin\n"))
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[uint64]string{
		0x1000: "outer blob", 0x103f: "outer blob", 0x1040: "inner", 0x104f: "inner",
		0x1050: "outer blob", 0x10ff: "outer blob", 0x1100: "", 0x2000: "a.B.c", 0x2010: "", 0xfff: "",
	} {
		got, ok := m.Lookup(addr)
		if ok != (want != "") || !strings.HasPrefix(got.Name, want) {
			t.Errorf("Lookup(%#x) = %q, %v; want %q", addr, got.Name, ok, want)
		}
	}
	if m.Len() != 4 {
		t.Errorf("Len = %d, want 4 (the empty symbol is skipped)", m.Len())
	}
	var nilMap *PerfMap
	if _, ok := nilMap.Lookup(0x1000); ok {
		t.Error("nil map found a symbol")
	}
}

func TestParsePerfMapErrors(t *testing.T) {
	for _, in := range []string{
		"1000\n",
		"1000 10\n",
		"1000 10 \n",
		"zz 10 name\n",
		"1000 -10 name\n",
		"ffffffffffffffff 10 wraps\n",
		"1000 10 ok\n0x 10 name\n",
		"1000 10 " + strings.Repeat("x", maxPerfMapLine) + "\n",
	} {
		if _, err := ParsePerfMap(strings.NewReader(in)); err == nil || !strings.HasPrefix(err.Error(), "parse perf map line") {
			t.Errorf("ParsePerfMap(%.40q) error = %v, want a line error", in, err)
		}
	}
	// Windows line ends and blank lines are fine; a last line without a
	// newline too.
	m, err := ParsePerfMap(strings.NewReader("\r\n1000 10 void a.B.c(int)\r\n\n2000 10 x"))
	if err != nil || m.Len() != 2 {
		t.Fatalf("ParsePerfMap = %v, %v; want 2 symbols", m, err)
	}
	if s, _ := m.Lookup(0x1000); s.Name != "a.B.c" {
		t.Errorf("name %q, want a.B.c", s.Name)
	}
}
