package jvm

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/leakscope/leakscope/probe/procfs"
)

// VM is a HotSpot JVM found in a process.
type VM struct {
	Pid    int    // host pid
	LibJVM string // path of libjvm.so as the JVM sees it
	Home   string // the Java home holding LibJVM ("" if not found)
	// Version is the Java runtime version from Home's release file, e.g.
	// "17.0.15+6-Debian-1deb12u1" ("" if unknown).
	Version string
	// Vendor is the release file's IMPLEMENTOR ("Eclipse Adoptium",
	// "Debian"; "" if unknown).
	Vendor string
	// Object is libjvm.so as leakscope reads it (through /proc/PID), and
	// Bias its load bias in the JVM (0 if unknown).
	Object string
	Bias   uint64
}

// Find reports whether the process pid, with mappings maps, runs a HotSpot
// JVM: libjvm.so is mapped and exports HotSpot's serviceability tables
// (gHotSpotVMStructs). OpenJ9, whose SIGQUIT writes a javacore file
// instead of starting an attach listener, is not HotSpot.
func Find(pid int, maps []procfs.Mapping) (*VM, bool) {
	var lib procfs.Mapping
	for _, m := range maps {
		base := path.Base(m.Path)
		if strings.HasPrefix(base, "libj9vm") {
			return nil, false
		}
		if base == "libjvm.so" && lib.Path == "" {
			lib = m
		}
	}
	if lib.Path == "" || !hotSpot(procfs.ObjectPath(pid, lib)) {
		return nil, false
	}
	vm := &VM{Pid: pid, LibJVM: lib.Path, Object: procfs.ObjectPath(pid, lib)}
	if bias, err := LoadBias(vm.Object, lib.Start, lib.Offset); err == nil {
		vm.Bias = bias
	}
	vm.Home, vm.Version, vm.Vendor = release(pid, lib.Path)
	return vm, true
}

// Build names the JVM as its warnings do: "HotSpot 25.0.1+8-LTS".
func (vm *VM) Build() string {
	if vm.Version == "" {
		return "HotSpot of unknown version"
	}
	return "HotSpot " + vm.Version
}

// hotSpot reports whether the ELF object at p exports gHotSpotVMStructs.
func hotSpot(p string) bool {
	f, err := procfs.OpenELF(p)
	if err != nil {
		return false
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return false
	}
	for _, s := range syms {
		if s.Name == "gHotSpotVMStructs" && s.Section != elf.SHN_UNDEF {
			return true
		}
	}
	return false
}

// release finds the Java home above libjvm (lib/server/libjvm.so in JDK 9
// and later, jre/lib/amd64/server/libjvm.so in JDK 8) by its release file
// and reads the runtime version and the vendor from it.
func release(pid int, libjvm string) (home, version, vendor string) {
	dir := path.Dir(libjvm)
	for i := 0; i < 4 && dir != "/"; i++ {
		dir = path.Dir(dir)
		f, err := procfs.OpenFile(nil, fmt.Sprintf("/proc/%d/root%s/release", pid, dir), releaseLimits)
		if err != nil {
			continue
		}
		defer f.Close()
		vals := parseRelease(f)
		version = vals["JAVA_RUNTIME_VERSION"]
		if version == "" {
			version = vals["JAVA_VERSION"]
		}
		return dir, version, vals["IMPLEMENTOR"]
	}
	return "", "", ""
}

// releaseLimits accept a Java release file: a few KiB of KEY="value" lines.
var releaseLimits = procfs.FileLimits{MaxSize: 1 << 20, Owner: procfs.AnyOwner, FollowLink: true}

// parseRelease reads KEY="value" lines of a Java release file.
func parseRelease(f *os.File) map[string]string {
	vals := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		vals[strings.TrimSpace(k)] = v
	}
	return vals
}
