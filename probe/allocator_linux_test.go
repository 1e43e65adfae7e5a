//go:build linux && amd64

package probe

import "testing"

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
