//go:build linux && amd64

package target

import (
	"strings"
	"testing"
)

func TestParseListLine(t *testing.T) {
	for line, want := range map[string]string{
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0000000000)": "/lib/x86_64-linux-gnu/libc.so.6",
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f0000000000)":                  "/lib64/ld-linux-x86-64.so.2",
		"\tlinux-vdso.so.1 (0x00007ffc00000000)":                              "",
		"\tlibfoo.so => not found":                                            "",
		"\tlib dir/libx.so => /opt/my libs/libx.so (0x1000)":                  "/opt/my libs/libx.so",
	} {
		got := parseListLine(line)
		if (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
			t.Errorf("parseListLine(%q) = %v, want %q", line, got, want)
		}
	}
}

// FuzzParseListLine checks the parser of ld.so --list output (a program's
// own dynamic linker prints it, so it is outside input): it never panics,
// returns at most one path, always absolute and taken from the line, and
// reads back both forms ld.so prints for any path.
func FuzzParseListLine(f *testing.F) {
	f.Add("\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0000000000)", "/lib/libz.so.1")
	f.Add("\t/lib64/ld-linux-x86-64.so.2 (0x00007f0000000000)", "/a b/c (d)")
	f.Add("\tlinux-vdso.so.1 (0x00007ffd00000000)", "/x=>y")
	f.Add("\tlibmissing.so => not found", "/")
	f.Fuzz(func(t *testing.T, line, path string) {
		got := parseListLine(line)
		if len(got) > 1 {
			t.Fatalf("parseListLine(%q) = %q: more than one path", line, got)
		}
		if len(got) == 1 && (!strings.HasPrefix(got[0], "/") || !strings.Contains(line, got[0])) {
			t.Fatalf("parseListLine(%q) = %q: not an absolute path from the line", line, got)
		}
		if !strings.HasPrefix(path, "/") || strings.Contains(path, "=>") || strings.TrimSpace(path) != path ||
			strings.ContainsAny(path, "\n\r") {
			return
		}
		for _, l := range []string{"\tlibx.so.1 => " + path + " (0x00007f0000001000)", "\t" + path + " (0x00007f0000001000)"} {
			if got := parseListLine(l); len(got) != 1 || got[0] != path {
				t.Fatalf("parseListLine(%q) = %q, want [%q]", l, got, path)
			}
		}
	})
}
