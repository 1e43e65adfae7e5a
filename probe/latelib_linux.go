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
// of each declared pair, and for a JVM every library of its JDK
// (<java.home>/lib/*.so, beside lib/server/libjvm.so). Uprobes go on
// files, and the kernel installs them as a process maps the file, so a
// library loaded after attach (libzip.so on a JVM's first use of
// java.util.zip, a dlopen'ed libz) is traced from its first call, not
// from the refresh that notices it milliseconds later. Files are found
// under the target's root.
func (t *Tracer) probeUnloadedLocked(maps []procfs.Mapping, jvm bool) {
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
	if !jvm {
		return
	}
	for _, m := range maps {
		if filepath.Base(m.Path) != "libjvm.so" || m.Deleted {
			continue
		}
		lib := filepath.Dir(filepath.Dir(m.Path))
		ents, err := os.ReadDir(root + lib)
		if err != nil {
			t.warnOnce(fmt.Sprintf("the JDK's libraries in %s are probed only once loaded: %v", lib, err))
			return
		}
		for _, e := range ents {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".so") {
				probe(lib + "/" + e.Name())
			}
		}
		return
	}
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
