package jvm

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseReply checks that ParseReply never panics, that a reply it
// accepts is its result code line and the output after it, that every
// "CODE\nOUTPUT" is accepted as it was written, and that its errors quote
// little of the reply, however long.
func FuzzParseReply(f *testing.F) {
	f.Add([]byte("0\n-XX:+PreserveFramePointer\n"))
	f.Add([]byte("0\n"))
	f.Add([]byte("1\nUnknown diagnostic command\n"))
	f.Add([]byte("-1\r\n"))
	f.Add([]byte("101"))
	f.Add([]byte(""))
	f.Add([]byte("\n"))
	f.Add(bytes.Repeat([]byte("x"), 5000))
	f.Add([]byte(" 0 \nout\x00put"))
	f.Fuzz(func(t *testing.T, data []byte) {
		code, out, err := ParseReply(data)
		if err != nil {
			if code != 0 || out != "" {
				t.Fatalf("error %v with code %d and output %q", err, code, out)
			}
			if len(err.Error()) > 4*maxExcerpt+100 { // %q writes up to 4 bytes a byte
				t.Fatalf("error of %d bytes for a reply of %d", len(err.Error()), len(data))
			}
			return
		}
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok || out != string(rest) {
			t.Fatalf("reply %q parsed to output %q", data, out)
		}
		if want, err := strconv.Atoi(strings.TrimSpace(string(line))); err != nil || want != code {
			t.Fatalf("reply %q parsed to code %d", data, code)
		}
		c2, o2, err := ParseReply([]byte(strconv.Itoa(code) + "\n" + out))
		if err != nil || c2 != code || o2 != out {
			t.Fatalf("round trip of (%d, %q): (%d, %q, %v)", code, out, c2, o2, err)
		}
	})
}
