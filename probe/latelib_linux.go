//go:build linux && amd64

package probe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/leakscope/leakscope/probe/procfs"
)

// libraryDirs are where the dynamic linker finds a library by name on the
// systems leakscope runs on (Debian's multiarch directories first).
var libraryDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// probeUnloadedLocked probes, before the target loads them, the libraries
// whose calls leakscope traces: the system zlib (libz.so.1), the library
// of each declared pair, and for a JVM every library of its JDK (jdkLib,
// <java.home>/lib: its *.so files). Uprobes go on files, and the kernel
// installs them as a process maps the file, so a library loaded later (a
// JVM's libzip.so on its first use of java.util.zip, a dlopen'ed libz) is
// traced from its first call, not from the refresh that notices it
// milliseconds later. The JDK's libjvm.so is also read and its unwind
// rows written now: under run, the stop at its load then lasts a few
// milliseconds instead of ~190. Files are found under the target's root.
func (t *Tracer) probeUnloadedLocked(jdkLib string) {
	root := fmt.Sprintf("/proc/%d/root", t.pid)
	probe := func(display string) {
		if err := t.attachResources(root+display, display); err != nil {
			t.warnOnce(fmt.Sprintf("probe %s before it is loaded: %v", display, err))
		}
	}
	names := []string{"libz.so.1"}
	for _, p := range t.opts.Track {
		switch {
		case p.Library == "*" || p.Library == "":
		case strings.HasPrefix(p.Library, "/"):
			probe(p.Library)
		default:
			names = append(names, p.Library)
		}
	}
	for _, name := range names {
		if path, ok := findLibrary(root, name); ok {
			probe(path)
		}
	}
	if jdkLib == "" {
		return
	}
	ents, err := os.ReadDir(root + jdkLib)
	if err != nil {
		t.warnOnce(fmt.Sprintf("the JDK's libraries in %s are probed only once loaded: %v", jdkLib, err))
		return
	}
	n := 0
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".so") {
			continue
		}
		if n++; n > maxJDKLibraries {
			t.warnOnce(fmt.Sprintf("%s holds more than %d libraries: the rest are probed only once loaded", jdkLib, maxJDKLibraries))
			break
		}
		probe(jdkLib + "/" + e.Name())
	}
	libjvm := jdkLib + "/server/libjvm.so"
	if _, err := os.Stat(root + libjvm); err == nil {
		probe(libjvm)
		t.prepareLocked(libjvm)
	}
}

// prepareLocked reads an object the target will map (path as the target
// sees it, links resolved, as /proc/PID/maps names it) and writes its
// unwind rows now, so that the refresh when it is mapped has only the
// range table left to write: under run, the command waits for that
// refresh (a JVM's libjvm.so: 187 ms of stop without this, ~20 with it;
// node's 372k rows: ~650 ms).
func (t *Tracer) prepareLocked(path string) {
	m := procfs.Mapping{Path: path}
	t.view.Classify(m)
	if _, done := t.view.UnwindSpan(path); !done && t.opts.Unwind != UnwindFP &&
		(t.opts.Unwind != UnwindAuto || !t.view.KeepsFramePointers(m)) {
		t.view.SetUnwindSpan(path, t.uploadRows(m))
	}
}

// maxJDKLibraries bounds the libraries probed ahead in a JDK's lib
// directory, which under attach is the target's to fill: a JDK has ~50.
const maxJDKLibraries = 256

// jdkLibDir is <java.home>/lib of a JVM among objects (libjvm.so in
// lib/server, or the launcher's libjli.so in lib), "" for none.
func jdkLibDir(objects []string) string {
	for _, o := range objects {
		switch filepath.Base(o) {
		case "libjvm.so":
			return filepath.Dir(filepath.Dir(o))
		case "libjli.so":
			return filepath.Dir(o)
		}
	}
	return ""
}

// findLibrary finds a library by name, or by the prefix of its name that
// a declared pair gives ("libbz2.so"), in libraryDirs under root.
func findLibrary(root, name string) (string, bool) {
	for _, dir := range libraryDirs {
		if st, err := os.Stat(root + dir + "/" + name); err == nil && st.Mode().IsRegular() {
			return dir + "/" + name, true
		}
		matches, _ := filepath.Glob(root + dir + "/" + name + "*")
		for _, m := range matches {
			if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() {
				return strings.TrimPrefix(m, root), true
			}
		}
	}
	return "", false
}
