package termtext

import (
	"strings"
	"unicode/utf8"
)

// Sanitize returns s with every character a terminal could act on
// rendered as a visible Go-style escape, so the result prints as one
// line of inert text:
//
//   - C0 controls and DEL: \a \b \t \n \v \f \r for those that have a short
//     form, else \xHH (ESC is \x1b, DEL \x7f);
//   - C1 controls U+0080-U+009F (a terminal may take U+009B as CSI): \u0080
//     to \u009f;
//   - bidirectional controls, which reorder the text displayed around
//     them (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), and
//     the line and paragraph separators U+2028 and U+2029: \u202e etc.;
//   - each byte of invalid UTF-8: \xHH.
//
// Everything else, a backslash included, is kept as it is. The result is
// meant to be read, not parsed back: a name that holds a literal `\x1b`
// prints the same as one that holds an ESC. That ambiguity is harmless,
// since neither moves the cursor, and escaping every backslash would
// change every clean string that has one (strconv.Quote'd command-line
// arguments, Windows-style paths). Machine-readable reports (JSON, pprof)
// keep the exact bytes.
//
// When s needs no escape, Sanitize returns s itself without allocating.
// The result is always valid UTF-8 and holds no byte below 0x20, no 0x7f
// and no C1 control.
func Sanitize(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				writeControl(&b, c)
			} else {
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			writeHex(&b, `\x`, uint32(c), 2)
		case unsafeRune(r):
			writeHex(&b, `\u`, uint32(r), 4)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// firstUnsafe returns the index of the first byte of s that Sanitize
// escapes, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r) {
			return i
		}
		i += n
	}
	return -1
}

// unsafeRune reports whether r, a valid non-ASCII rune, is a C1 control,
// a bidirectional control or a line or paragraph separator.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x2028 && r <= 0x202e: // separators, then LRE RLE PDF LRO RLO
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI RLI FSI PDI
		return true
	}
	return false
}

// shortEscapes are the C0 controls with a one-letter escape.
var shortEscapes = [0x20]byte{
	'\a': 'a', '\b': 'b', '\t': 't', '\n': 'n', '\v': 'v', '\f': 'f', '\r': 'r',
}

func writeControl(b *strings.Builder, c byte) {
	if c < 0x20 && shortEscapes[c] != 0 {
		b.WriteByte('\\')
		b.WriteByte(shortEscapes[c])
		return
	}
	writeHex(b, `\x`, uint32(c), 2)
}

func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	const hex = "0123456789abcdef"
	b.WriteString(prefix)
	for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
		b.WriteByte(hex[v>>shift&0xf])
	}
}
