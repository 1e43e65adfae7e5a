package termtext

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

var sanitizeCases = []struct {
	name, in, want string
}{
	{"empty", "", ""},
	{"plain", "main.(*decoder).run", "main.(*decoder).run"},
	{"C++", "std::vector<int, std::allocator<int> >::_M_realloc_insert", "std::vector<int, std::allocator<int> >::_M_realloc_insert"},
	{"markup", `<script>alert(1)</script>`, `<script>alert(1)</script>`},
	{"unicode", "héllo 世界 🙂", "héllo 世界 🙂"},
	{"backslash kept", `C:\x1b\path "q"`, `C:\x1b\path "q"`},
	{"CSI", "a\x1b[2Jb", `a\x1b[2Jb`},
	{"OSC title", "\x1b]0;pwned\x07", `\x1b]0;pwned\a`},
	{"OSC 8 link", "\x1b]8;;http://x\x1b\\y\x1b]8;;\x1b\\", `\x1b]8;;http://x\x1b\y\x1b]8;;\x1b\`},
	{"OSC 52 clipboard", "\x1b]52;c;cm0gLXJmIH4=\x07", `\x1b]52;c;cm0gLXJmIH4=\a`},
	{"LF forges a line", "f\nleakscope: all good, no leaks", `f\nleakscope: all good, no leaks`},
	{"CR overwrites", "f\rok", `f\rok`},
	{"short escapes", "\a\b\t\n\v\f\r", `\a\b\t\n\v\f\r`},
	{"other C0", "\x00\x01\x1f", `\x00\x01\x1f`},
	{"DEL", "a\x7fb", `a\x7fb`},
	{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
	{"C1 range", "\u0080\u0085\u009f", `\u0080\u0085\u009f`},
	{"after C1 is fine", "\u00a0\u00e9", "\u00a0\u00e9"},
	{"bidi override", "abc\u202edcb", `abc\u202edcb`},
	{"bidi embeddings", "\u202a\u202b\u202c\u202d", `\u202a\u202b\u202c\u202d`},
	{"bidi isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
	{"bidi marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
	{"separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
	{"neighbours kept", "\u2027\u202f\u2065\u206a\u200d", "\u2027\u202f\u2065\u206a\u200d"},
	{"invalid byte", "a\xffb", `a\xffb`},
	{"truncated rune", "a\xe4\xb8", `a\xe4\xb8`},
	{"encoded C1 bytes", "\xc2\x9b", `\u009b`},
	{"lone C1 byte", "\x9b", `\x9b`},
	{"surrogate half", "\xed\xa0\x80", `\xed\xa0\x80`},
}

func TestSanitize(t *testing.T) {
	for _, tc := range sanitizeCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sanitize(tc.in); got != tc.want {
				t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestSanitizeCleanDoesNotAllocate checks the fast path: a string that
// needs no escape comes back as it is.
func TestSanitizeCleanDoesNotAllocate(t *testing.T) {
	s := strings.Repeat("std::map<K, V>::operator[] /usr/lib/libfoo.so.1 é ", 20)
	if n := testing.AllocsPerRun(100, func() { _ = Sanitize(s) }); n != 0 {
		t.Errorf("Sanitize of a clean string made %v allocations, want 0", n)
	}
	if got := Sanitize(s); got != s {
		t.Errorf("Sanitize changed a clean string")
	}
}

func FuzzSanitize(f *testing.F) {
	for _, tc := range sanitizeCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Sanitize(s)
		if err := printable(got); err != "" {
			t.Fatalf("Sanitize(%q) = %q: %s", s, got, err)
		}
		if clean := printable(s) == ""; clean != (got == s) {
			t.Fatalf("Sanitize(%q) = %q: input printable %v, unchanged %v", s, got, clean, got == s)
		}
	})
}

// printable says what in s a terminal could act on, "" when nothing: the
// property Sanitize's result has.
func printable(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	for i, r := range s {
		switch {
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf("control byte %#x at %d", r, i)
		case r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("C1 control %U at %d", r, i)
		case r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			return fmt.Sprintf("bidi control %U at %d", r, i)
		case r == 0x2028 || r == 0x2029:
			return fmt.Sprintf("separator %U at %d", r, i)
		}
	}
	return ""
}
