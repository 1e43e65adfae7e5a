package procfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestParseMapsLine(t *testing.T) {
	tests := []struct {
		line string
		want Mapping
	}{
		{
			line: "7f047db1f000-7f047dc75000 r-xp 00026000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6",
			want: Mapping{Start: 0x7f047db1f000, End: 0x7f047dc75000, Offset: 0x26000, Perms: "r-xp", Dev: "fe:00", Inode: 326269, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		},
		{
			line: "56509f417000-56509f438000 rw-p 00000000 00:00 0                          [heap]",
			want: Mapping{Start: 0x56509f417000, End: 0x56509f438000, Perms: "rw-p", Dev: "00:00", Path: "[heap]"},
		},
		{
			// Anonymous memory: the kernel ends the line with a space.
			line: "7f047da74000-7f047da96000 rw-p 00000000 00:00 0 ",
			want: Mapping{Start: 0x7f047da74000, End: 0x7f047da96000, Perms: "rw-p", Dev: "00:00"},
		},
		{
			line: "7f047da74000-7f047da96000 rw-p 00000000 00:00 0",
			want: Mapping{Start: 0x7f047da74000, End: 0x7f047da96000, Perms: "rw-p", Dev: "00:00"},
		},
		{
			line: "7f37c3491000-7f37c3493000 r-xs 00001000 fe:00 9979211                    /tmp/dir with space/lib x.so (deleted)",
			want: Mapping{Start: 0x7f37c3491000, End: 0x7f37c3493000, Offset: 0x1000, Perms: "r-xs", Dev: "fe:00", Inode: 9979211, Path: "/tmp/dir with space/lib x.so", Deleted: true},
		},
		{
			line: "7f37c2817000-7f37c2818000 rw-s 00000000 00:01 1025                       /memfd:jit code (deleted)",
			want: Mapping{Start: 0x7f37c2817000, End: 0x7f37c2818000, Perms: "rw-s", Dev: "00:01", Inode: 1025, Path: "/memfd:jit code", Deleted: true},
		},
		{
			// A long prefix leaves a single space before the path.
			line: "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
			want: Mapping{Start: 0xffffffffff600000, End: 0xffffffffff601000, Perms: "--xp", Dev: "00:00", Path: "[vsyscall]"},
		},
		{
			line: "7000-8000 r--p 123456789a 103:0a 18446744073709551615 /a path ending in space \r",
			want: Mapping{Start: 0x7000, End: 0x8000, Offset: 0x123456789a, Perms: "r--p", Dev: "103:0a", Inode: 1<<64 - 1, Path: "/a path ending in space \r"},
		},
	}
	for _, tt := range tests {
		got, err := ParseMaps(strings.NewReader(tt.line + "\n"))
		if err != nil {
			t.Errorf("ParseMaps(%q): %v", tt.line, err)
			continue
		}
		if len(got) != 1 || got[0] != tt.want {
			t.Errorf("ParseMaps(%q) = %+v, want [%+v]", tt.line, got, tt.want)
		}
	}
}

func TestParseMapsErrors(t *testing.T) {
	good := "7000-8000 r-xp 00000000 fe:00 1 /bin/true\n"
	tests := []struct {
		bad  string
		want string
	}{
		{"7000-8000 r-xp 00000000 fe:00", "want at least 5 space-separated fields"},
		{"70008000 r-xp 00000000 fe:00 1 /x", `address range "70008000"`},
		{"7000-zz r-xp 00000000 fe:00 1 /x", `end address "zz": invalid syntax`},
		{"0x7000-8000 r-xp 00000000 fe:00 1 /x", `start address "0x7000"`},
		{"8000-7000 r-xp 00000000 fe:00 1 /x", "start not below end"},
		{"7000-7000 r-xp 00000000 fe:00 1 /x", "start not below end"},
		{"7000-8000 rxp 00000000 fe:00 1 /x", `permissions "rxp"`},
		{"7000-8000 r-xq 00000000 fe:00 1 /x", `permissions "r-xq"`},
		{"7000-8000 r-xp -1 fe:00 1 /x", `offset "-1"`},
		{"7000-8000 r-xp 00000000 fe00 1 /x", `device "fe00"`},
		{"7000-8000 r-xp 00000000 fe:00 x1 /x", `inode "x1": invalid syntax`},
		{"7000-8000 r-xp 00000000 fe:00 -1 /x", `inode "-1"`},
		{"17000-18000000000000000 r-xp 00000000 fe:00 1 /x", "value out of range"},
		{"7000-8000  r-xp 00000000 fe:00 1 /x", `permissions ""`},
	}
	for _, tt := range tests {
		// The bad line is line 3, after a good line and an empty one.
		_, err := ParseMaps(strings.NewReader(good + "\n" + tt.bad + "\n" + good))
		if err == nil {
			t.Errorf("ParseMaps(%q): no error", tt.bad)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "parse maps line 3: ") || !strings.Contains(msg, tt.want) {
			t.Errorf("ParseMaps(%q) error %q, want prefix %q containing %q", tt.bad, msg, "parse maps line 3: ", tt.want)
		}
	}
}

func TestParseMapsLongLine(t *testing.T) {
	line := "7000-8000 r-xp 00000000 fe:00 1 /" + strings.Repeat("a", maxLineBytes) + "\n"
	_, err := ParseMaps(strings.NewReader("7000-8000 r-xp 00000000 fe:00 1 /x\n" + line))
	if err == nil || !strings.HasPrefix(err.Error(), "parse maps line 2: longer than") {
		t.Errorf("ParseMaps(long line) error %v, want parse maps line 2: longer than ...", err)
	}
}

// TestParseMapsFixtures parses maps files captured from real processes.
func TestParseMapsFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.maps")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		maps, err := ParseMaps(bytes.NewReader(data))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if want := bytes.Count(data, []byte("\n")); len(maps) != want {
			t.Errorf("%s: %d mappings, want %d", name, len(maps), want)
		}
		var sawLibc, sawStack bool
		for _, m := range maps {
			sawLibc = sawLibc || strings.HasSuffix(m.Path, "/libc.so.6") && m.Exec()
			sawStack = sawStack || m.Path == "[stack]"
			if strings.HasSuffix(m.Path, deletedSuffix) {
				t.Errorf("%s: path %q keeps the deleted suffix", name, m.Path)
			}
		}
		if !sawLibc || !sawStack {
			t.Errorf("%s: executable libc.so.6 found %v, [stack] found %v; want both", name, sawLibc, sawStack)
		}
	}

	maps := mustParseFile(t, "testdata/python-deleted.maps")
	want := map[string]bool{
		"/tmp/dir with space/lib x.so":      true,
		"/tmp/dir with space/kept file.bin": false,
		"/memfd:jit code":                   true,
	}
	for _, m := range maps {
		if deleted, ok := want[m.Path]; ok {
			if m.Deleted != deleted {
				t.Errorf("%s: Deleted = %v, want %v", m.Path, m.Deleted, deleted)
			}
			delete(want, m.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("mappings not found: %v", want)
	}
}

func mustParseFile(t *testing.T, name string) []Mapping {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := ParseMaps(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return maps
}

func TestMappingExec(t *testing.T) {
	for perms, want := range map[string]bool{"r-xp": true, "--xp": true, "rw-p": false, "r--s": false, "": false} {
		if got := (Mapping{Perms: perms}).Exec(); got != want {
			t.Errorf("Mapping{Perms: %q}.Exec() = %v, want %v", perms, got, want)
		}
	}
}

func TestObjectPath(t *testing.T) {
	tests := []struct {
		m    Mapping
		want string
	}{
		{Mapping{Start: 0x7f00, End: 0x8f00, Path: "/usr/lib/libz.so.1"}, "/proc/42/root/usr/lib/libz.so.1"},
		{Mapping{Start: 0x7f00, End: 0x8f00, Path: "/opt/my app/lib.so"}, "/proc/42/root/opt/my app/lib.so"},
		{Mapping{Start: 0x7f0AB000, End: 0x7f0AC000, Path: "/usr/lib/libz.so.1", Deleted: true}, "/proc/42/map_files/7f0ab000-7f0ac000"},
		{Mapping{Start: 0x7f00, End: 0x8f00, Path: "[vdso]"}, ""},
		{Mapping{Start: 0x7f00, End: 0x8f00, Path: ""}, ""},
	}
	for _, tt := range tests {
		if got := ObjectPath(42, tt.m); got != tt.want {
			t.Errorf("ObjectPath(42, %+v) = %q, want %q", tt.m, got, tt.want)
		}
	}
}

func TestProcError(t *testing.T) {
	perm := &fs.PathError{Op: "open", Path: "/proc/7/maps", Err: syscall.EACCES}
	err := procError(7, "maps", perm)
	if !errors.Is(err, fs.ErrPermission) || errors.Is(err, ErrNoProcess) {
		t.Errorf("procError(permission) = %v: want fs.ErrPermission and not ErrNoProcess", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "process 7") || !strings.Contains(msg, "CAP_SYS_PTRACE") {
		t.Errorf("procError(permission) = %q: want the pid and the missing capability", msg)
	}
	gone := &fs.PathError{Op: "read", Path: "/proc/7/maps", Err: syscall.ESRCH}
	if err := procError(7, "maps", gone); !errors.Is(err, ErrNoProcess) || err.Error() != "process 7 not found" {
		t.Errorf("procError(ESRCH) = %v, want process 7 not found wrapping ErrNoProcess", err)
	}
}
