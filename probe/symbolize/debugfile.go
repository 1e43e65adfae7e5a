package symbolize

import (
	"debug/elf"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/leakscope/leakscope/probe/procfs"
)

// debugRoot is where distributions install separate debug files
// (Debian's *-dbgsym packages, Fedora's debuginfo).
const debugRoot = "/usr/lib/debug"

// debugFile is an opened separate debug file.
type debugFile struct {
	path string
	f    *os.File
	elf  *elf.File
}

func (d *debugFile) close() {
	if d != nil {
		d.f.Close()
	}
}

// findDebugFile looks for the separate debug file of the object at path the
// way gdb does, first by build ID and then by .gnu_debuglink, and returns
// nil when there is none. root is the target's filesystem root as seen
// from here ("/proc/PID/root", or "" for the host): debug files installed
// in the target's image are searched before the host's.
//
// A candidate is used only if it verifiably belongs to the object (same
// build ID, or the debuglink CRC), so searching the host for a container's
// object cannot pick up a mismatched file.
func findDebugFile(path, root, id string, link debuglink) *debugFile {
	roots := []string{root}
	if root != "" && root != "/" {
		roots = append(roots, "")
	}
	if len(id) > 2 {
		for _, r := range roots {
			p := filepath.Join(r, debugRoot, ".build-id", id[:2], id[2:]+".debug")
			if d := openDebugFile(p, path, func(d *debugFile) bool { return matchBuildID(d, id) }); d != nil {
				return d
			}
		}
	}
	if link.name == "" {
		return nil
	}
	dir := filepath.Dir(path)
	rel := filepath.Dir(strings.TrimPrefix(path, root))
	candidates := []string{
		filepath.Join(dir, link.name),
		filepath.Join(dir, ".debug", link.name),
	}
	for _, r := range roots {
		candidates = append(candidates, filepath.Join(r, debugRoot, rel, link.name))
	}
	for _, p := range candidates {
		match := func(d *debugFile) bool {
			if id != "" {
				if other, err := buildID(d.elf); err == nil && other != "" {
					return other == id
				}
			}
			return matchCRC(d.f, link.crc)
		}
		if d := openDebugFile(p, path, match); d != nil {
			return d
		}
	}
	return nil
}

// openDebugFile opens candidate as ELF and returns it if match accepts it.
// The object itself is never its own debug file (a debuglink naming the
// object's own base name in its own directory).
func openDebugFile(candidate, object string, match func(*debugFile) bool) *debugFile {
	f, err := procfs.OpenFile(nil, candidate, procfs.ObjectLimits)
	if err != nil {
		return nil
	}
	if sameFile(f, object) {
		f.Close()
		return nil
	}
	d := &debugFile{path: candidate, f: f}
	ok := safely("debug file", func() error {
		ef, err := elf.NewFile(f)
		if err != nil {
			return err
		}
		d.elf = ef
		if !match(d) {
			return os.ErrNotExist
		}
		return nil
	}) == nil
	if !ok {
		f.Close()
		return nil
	}
	return d
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

func matchBuildID(d *debugFile, id string) bool {
	other, err := buildID(d.elf)
	return err == nil && other == id
}

// matchCRC reports whether the whole file has the CRC-32 (IEEE, as zlib's
// crc32) recorded in the debuglink.
func matchCRC(f *os.File, want uint32) bool {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 1<<62)); err != nil {
		return false
	}
	return h.Sum32() == want
}
