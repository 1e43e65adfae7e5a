package probe

import (
	"fmt"
	"os"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// zlibFamily are zlib's stream lifecycles, keyed by the z_stream pointer
// (the first argument of each). Every init ends in an End of its kind;
// inflate() is probed because it allocates the window lazily.
var zlibFamily = []probeSpec{
	{"inflateInit_", func(o *leakObjects) *ebpf.Program { return o.ZlibInflateInitEnter }, true},
	{"inflateInit2_", func(o *leakObjects) *ebpf.Program { return o.ZlibInflateInitEnter }, true},
	{"inflateBackInit_", func(o *leakObjects) *ebpf.Program { return o.ZlibInflateInitEnter }, true},
	{"deflateInit_", func(o *leakObjects) *ebpf.Program { return o.ZlibDeflateInitEnter }, true},
	{"deflateInit2_", func(o *leakObjects) *ebpf.Program { return o.ZlibDeflateInitEnter }, true},
	{"inflateEnd", func(o *leakObjects) *ebpf.Program { return o.ZlibInflateEndEnter }, false},
	{"inflateBackEnd", func(o *leakObjects) *ebpf.Program { return o.ZlibInflateEndEnter }, false},
	{"deflateEnd", func(o *leakObjects) *ebpf.Program { return o.ZlibDeflateEndEnter }, false},
	{"inflate", func(o *leakObjects) *ebpf.Program { return o.ZlibInflateEnter }, false},
}

// attachZlib probes the zlib in the object at path (shown as display), if it
// holds one: the system libz.so.1, or a copy linked statically into an
// executable or another library (symbols may be local, in .symtab only).
// Each object is checked once, by inode.
func (t *Tracer) attachZlib(path, display string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil // not readable: nothing to probe
	}
	ino := st.Sys().(*syscall.Stat_t).Ino
	if t.zlib[ino] {
		return nil
	}
	t.zlib[ino] = true
	obj, err := t.cache.Object(path)
	if err != nil {
		return nil
	}
	if _, ok := obj.Lookup("inflateInit2_"); !ok {
		if _, ok := obj.Lookup("deflateInit2_"); !ok {
			return nil
		}
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", display, err)
	}
	n, err := t.attachFamily(ex, path, display, obj.Lookup, zlibFamily)
	if err != nil {
		return err
	}
	if n > 0 {
		t.view.zlib[ino] = true
		t.probed = append(t.probed, "zlib in "+display)
	}
	return nil
}
