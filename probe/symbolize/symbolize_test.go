package symbolize

import (
	"fmt"
	"github.com/leakscope/leakscope/internal/testutil"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// checkFunction symbolizes one byte into function name, as a stack frame
// inside its prologue would be, and expects name, file and line.
func checkFunction(t *testing.T, o *Object, name, wantFunc, wantFile string, wantLine int) {
	t.Helper()
	v := mustLookup(t, o, name)
	fn, file, line := o.Symbolize(v + 1)
	if fn != wantFunc || file != wantFile || line != wantLine {
		t.Errorf("%s: Symbolize(%s+1 = %#x) = %q, %s:%d; want %q, %s:%d", o.Path, name, v+1, fn, file, line, wantFunc, wantFile, wantLine)
	}
}

func TestSymbolizeC(t *testing.T) {
	prog := compile(t, "gcc", "prog.c", "-g", "-O0", "-fno-omit-frame-pointer")
	o := mustObject(t, prog)
	src := prog + ".c"
	lines := markers(t, "prog.c")
	if o.BuildID == "" {
		t.Errorf("%s: no build ID (gcc on Debian links with --build-id)", prog)
	}
	if o.DebugPath != "" {
		t.Errorf("%s: DebugPath = %q, want none: the object has its own symbols and DWARF", prog, o.DebugPath)
	}
	checkFunction(t, o, "leaf_alloc", "leaf_alloc", src, lines["leaf_alloc"])
	checkFunction(t, o, "middle", "middle", src, lines["middle"])

	// The return address of middle's call to leaf_alloc, minus one, is the
	// line of the call.
	ret := directCallReturn(t, o, "middle", "leaf_alloc")
	if !o.CallPrecedes(ret) {
		t.Errorf("CallPrecedes(%#x) = false after middle's call to leaf_alloc", ret)
	}
	fn, file, line := o.Symbolize(ret - 1)
	if fn != "middle" || file != src || line != lines["direct-call"] {
		t.Errorf("Symbolize(return address-1 = %#x) = %q, %s:%d; want middle, %s:%d", ret-1, fn, file, line, src, lines["direct-call"])
	}

	// Outside every symbol and line sequence.
	if fn, file, line := o.Symbolize(1 << 60); fn != "" || file != "" || line != 0 {
		t.Errorf("Symbolize(1<<60) = %q, %s:%d; want nothing", fn, file, line)
	}
	if _, ok := o.Lookup("no_such_function"); ok {
		t.Error("Lookup(no_such_function) found something")
	}
}

// directCallReturn finds the e8 call from function caller to callee and
// returns the address after it.
func directCallReturn(t *testing.T, o *Object, caller, callee string) uint64 {
	t.Helper()
	from, to := mustLookup(t, o, caller), mustLookup(t, o, callee)
	s, ok := o.syms.lookup(from, o.sectionOf)
	if !ok || s.size == 0 {
		t.Fatalf("no sized symbol for %s", caller)
	}
	code := make([]byte, s.size)
	code = code[:o.readCode(from, code)]
	for i := 0; i+5 <= len(code); i++ {
		rel := int32(uint32(code[i+1]) | uint32(code[i+2])<<8 | uint32(code[i+3])<<16 | uint32(code[i+4])<<24)
		ret := from + uint64(i) + 5
		if code[i] == 0xe8 && ret+uint64(int64(rel)) == to {
			return ret
		}
	}
	t.Fatalf("no call from %s to %s", caller, callee)
	return 0
}

func TestSymbolizeCXXDemangles(t *testing.T) {
	prog := compile(t, "g++", "prog.cc", "-g", "-O0")
	o := mustObject(t, prog)
	checkFunction(t, o, "_ZN4leak4Pool4grabEm", "leak::Pool::grab(unsigned long)", prog+".cc", markers(t, "prog.cc")["grab"])
}

// TestSeparateDebugFile strips a program and finds its symbols and lines
// again in a separate debug file at each place gdb would look.
func TestSeparateDebugFile(t *testing.T) {
	prog := compile(t, "gcc", "prog.c", "-g", "-O0", "-fno-omit-frame-pointer")
	src := prog + ".c"
	lines := markers(t, "prog.c")
	full := mustObject(t, prog)
	debug := prog + ".debug"
	run(t, "objcopy", "--only-keep-debug", prog, debug)

	// stripped writes a stripped copy of prog to dir/name, with a
	// debuglink to linkTo unless it is "".
	stripped := func(dir, name, linkTo string) string {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name)
		run(t, "strip", "--strip-all", "-o", out, prog)
		if linkTo != "" {
			run(t, "objcopy", "--add-gnu-debuglink="+linkTo, out)
		}
		return out
	}
	place := func(path string) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(debug)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	check := func(t *testing.T, root, path, wantDebug string) {
		t.Helper()
		c := NewCache()
		defer c.Close()
		o, err := c.ObjectIn(root, path)
		if err != nil {
			t.Fatal(err)
		}
		if o.DebugPath != wantDebug {
			t.Errorf("DebugPath = %q, want %q", o.DebugPath, wantDebug)
		}
		if o.BuildID != full.BuildID {
			t.Errorf("BuildID = %q, want %q as before stripping", o.BuildID, full.BuildID)
		}
		if wantDebug != "" {
			checkFunction(t, o, "leaf_alloc", "leaf_alloc", src, lines["leaf_alloc"])
		} else if _, ok := o.Lookup("leaf_alloc"); ok {
			t.Errorf("Lookup(leaf_alloc) found a symbol without a debug file")
		}
	}

	t.Run("debuglink same dir", func(t *testing.T) {
		// objcopy reads the debug file to compute the CRC, so it gets a path.
		obj := stripped(filepath.Dir(prog), "same", debug)
		check(t, "", obj, debug)
	})
	t.Run("debuglink .debug subdir", func(t *testing.T) {
		dir := t.TempDir()
		link := place(filepath.Join(dir, ".debug", "prog.debug"))
		obj := stripped(dir, "sub", link)
		check(t, "", obj, link)
	})
	t.Run("debuglink under root", func(t *testing.T) {
		root := t.TempDir()
		link := place(filepath.Join(root, "usr/lib/debug/app/prog.debug"))
		obj := stripped(filepath.Join(root, "app"), "rooted", link)
		check(t, root, obj, link)
	})
	t.Run("build id under root", func(t *testing.T) {
		root := t.TempDir()
		id := full.BuildID
		link := place(filepath.Join(root, "usr/lib/debug/.build-id", id[:2], id[2:]+".debug"))
		obj := stripped(filepath.Join(root, "app"), "byid", "")
		check(t, root, obj, link)
	})
	t.Run("debuglink crc mismatch", func(t *testing.T) {
		dir := t.TempDir()
		link := place(filepath.Join(dir, "prog.debug"))
		obj := stripped(dir, "bad", link)
		// Same name, different content: the CRC no longer matches.
		other := compile(t, "gcc", "frames.c", "-g", "-O0")
		run(t, "objcopy", "--only-keep-debug", other, link)
		check(t, "", obj, "")
	})
}

func TestCacheSharesObjectsByBuildID(t *testing.T) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("needs Debian's x86-64 libc: %v", err))
	}
	c := NewCache()
	defer c.Close()
	a, err := c.Object(libc)
	if err != nil {
		t.Fatal(err)
	}
	self := "/proc/" + strconv.Itoa(os.Getpid()) + "/root" + libc
	for _, p := range []string{libc, strings.Replace(libc, "/lib/", "/usr/lib/", 1), self} {
		b, err := c.Object(p)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("Object(%s) and Object(%s) differ; want one object per build ID %s", libc, p, a.BuildID)
		}
	}
	if a.Path != libc {
		t.Errorf("Path = %q, want the first path %q", a.Path, libc)
	}
	if len(c.objects) != 1 {
		t.Errorf("cache holds %d objects, want 1", len(c.objects))
	}
	if _, err := c.Object("/proc/self/no/such/file"); err == nil {
		t.Error("Object(missing file): no error")
	}
	if _, err := c.Object("/dev/null"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Object(/dev/null) error %v, want not a regular file", err)
	}
	if _, err := c.Object("testdata/prog.c"); err == nil || !strings.HasPrefix(err.Error(), "parse elf testdata/prog.c: ") {
		t.Errorf("Object(C source) error %v, want parse elf ...", err)
	}
}

// TestDebuglinkCRC covers objects without a build ID, whose debuglink is
// verified by CRC alone.
func TestDebuglinkCRC(t *testing.T) {
	prog := compile(t, "gcc", "prog.c", "-g", "-O0", "-Wl,--build-id=none")
	dir := filepath.Dir(prog)
	debug := filepath.Join(dir, "prog.debug")
	run(t, "objcopy", "--only-keep-debug", prog, debug)
	obj := filepath.Join(dir, "stripped")
	run(t, "strip", "--strip-all", "-o", obj, prog)
	run(t, "objcopy", "--add-gnu-debuglink="+debug, obj)

	o := mustObject(t, obj)
	if o.BuildID != "" || o.DebugPath != debug {
		t.Fatalf("BuildID %q, DebugPath %q; want none and %s", o.BuildID, o.DebugPath, debug)
	}
	checkFunction(t, o, "middle", "middle", prog+".c", markers(t, "prog.c")["middle"])

	// Flip one byte of the debug file: same name, wrong CRC.
	data, err := os.ReadFile(debug)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(debug, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// A new file: the cache keys objects without build ID by path, size
	// and mtime, so copy the object under another name.
	run(t, "cp", obj, obj+"2")
	if o := mustObject(t, obj+"2"); o.DebugPath != "" {
		t.Errorf("DebugPath = %q for a debug file with the wrong CRC", o.DebugPath)
	}
}
