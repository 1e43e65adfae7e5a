//go:build linux && amd64

package probe

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/probe/kernel"
	"github.com/leakscope/leakscope/probe/procfs"
	"github.com/leakscope/leakscope/probe/track"
	"github.com/leakscope/leakscope/probe/uprobe"
	"github.com/leakscope/leakscope/probe/zlib"
)

// resourceState is what a Tracer knows of the objects it probed for zlib
// and the declared pairs.
type resourceState struct {
	checked map[uint64]bool // inodes of objects already checked
	// pairs lists, per declared pair, the objects it is attached in.
	pairs [][]string
	// zlibLayouts describe the zlib copies whose stream bytes are
	// computed (object: layout; zlib.Computed).
	zlibLayouts []string
}

// acquireOp is how the return probe of an acquire call finds handle h
// (enum alloc_op).
func acquireOp(h track.Handle) uint32 {
	switch h.Kind {
	case track.Arg:
		return kernel.OpArgHandle
	case track.Out:
		return kernel.OpOutPtr
	case track.Reopen:
		return kernel.OpRealloc
	}
	return kernel.OpRetPtr
}

// pairKind is the kernel kind of the i-th declared pair.
func pairKind(i int) uint32 { return kernel.KindUser + uint32(i) }

// attachResources probes the resource pairs in the object at path (shown as
// display): zlib wherever it lives (the system libz.so.1, or a copy linked
// into an executable or library, symbols possibly local, in .symtab only),
// and every declared pair whose library this object is. Each object is
// checked once, by inode.
func (t *Tracer) attachResources(path, display string) error {
	if t.probes.Detached() {
		return nil
	}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // unmapped, or the process is gone: nothing to probe
	}
	if err != nil {
		t.warnOnce(fmt.Sprintf("%s: %v: a zlib or declared pair in it is not traced", display, err))
		return nil
	}
	ino := st.Sys().(*syscall.Stat_t).Ino
	if t.res.checked[ino] {
		return nil
	}
	t.res.checked[ino] = true
	obj, err := t.cache.Object(path)
	if err != nil {
		t.warnOnce(fmt.Sprintf("%s cannot be read as an ELF object (%v): a zlib or declared pair in it is not traced", display, err))
		return nil
	}
	var o *uprobe.Object
	open := func() error {
		if o != nil {
			return nil
		}
		o, err = uprobe.Open(path, display, obj.Lookup)
		return err
	}
	_, hasInflate := obj.Lookup("inflateInit2_")
	_, hasDeflate := obj.Lookup("deflateInit2_")
	if hasInflate || hasDeflate {
		if err := open(); err != nil {
			return err
		}
		family := zlib.TracedFamily(zlib.Library(display))
		var layout zlib.Layout
		computed := zlib.Computed(t.mallocTraced(), t.opts.SampleBytes > 0, zlib.Library(display))
		if computed {
			layout = zlib.ReadLayout(path)
			if t.jvmTarget() && zlib.JavaZip(path) {
				layout.ZStream = zlib.JNIZStreamSize
			}
			family = zlib.ComputedFamily(layout)
		}
		ls, n, err := t.uprobes.Family(o, family)
		t.probes.Keep(ls)
		if err != nil {
			return err
		}
		if n > 0 {
			t.view.ProbeZlib(ino, computed)
			if computed {
				t.noteZlibLayout(display, layout)
			}
		}
	}
	for i, p := range t.opts.Track {
		if !p.MatchesLibrary(display) {
			continue
		}
		if p.FallbackFor == "zlib" && (hasInflate || hasDeflate || needsZlib(path)) {
			continue // its zlib is probed itself
		}
		// No mallocs to count: the size argument, or for java.util.zip's
		// JNI entry points the bytes zlib allocates for the stream.
		var computed, window uint32
		var layout zlib.Layout
		if !t.mallocTraced() && p.FallbackFor == "zlib" {
			layout = zlib.ReadLayout(path)
			layout.ZStream = zlib.JNIZStreamSize
			computed, window = zlib.JNIBytes(p.Kind, layout)
		}
		var specs []uprobe.Spec
		for _, c := range p.Acquire {
			pc := kernel.PairCookie{Kind: pairKind(i), Op: acquireOp(c.Handle), Arg: uint32(c.Handle.Arg),
				Bytes: computed, Zwindow: window}
			if !t.mallocTraced() {
				pc.SizeArg = uint32(c.SizeArg)
			}
			specs = append(specs, uprobe.Spec{Symbol: c.Function, Prog: kernel.PairAcquireEnter, Ret: true, Cookie: pc.Encode()})
		}
		for _, c := range p.Release {
			pc := kernel.PairCookie{Kind: pairKind(i), Arg: uint32(c.Handle.Arg), Zwindow: window}
			specs = append(specs, uprobe.Spec{Symbol: c.Function, Prog: kernel.PairReleaseEnter, Cookie: pc.Encode()})
		}
		if !definesAll(obj, specs) {
			if p.Library != "*" && !p.Optional {
				t.warnOnce(fmt.Sprintf("--track %s: %s lacks some of its functions (%s); they are not traced", p.Kind, display, missing(obj, specs)))
			}
			if !definesAny(obj, p.Acquire) {
				continue
			}
		}
		if err := open(); err != nil {
			return err
		}
		ls, n, err := t.uprobes.Family(o, specs)
		t.probes.Keep(ls)
		if err != nil {
			return fmt.Errorf("--track %s: %w", p.Kind, err)
		}
		if n > 0 {
			t.res.pairs[i] = append(t.res.pairs[i], display)
			if computed != 0 {
				t.noteZlibLayout(display, layout)
			}
		}
	}
	return nil
}

// noteZlibLayout records, once, that the streams of the zlib in display
// are computed with layout (the probe set says so), and warns when its
// sizes are assumed.
func (t *Tracer) noteZlibLayout(display string, layout zlib.Layout) {
	d := display + ": " + layout.String()
	if slices.Contains(t.res.zlibLayouts, d) {
		return
	}
	t.res.zlibLayouts = append(t.res.zlibLayouts, d)
	if !layout.Known {
		t.warnOnce(fmt.Sprintf("%s: the struct sizes of zlib %q are not known to leakscope; stream bytes assume zlib %s's (use --malloc on for zlib's own numbers)", display, layout.Version, layout.Assumed))
	}
}

// needsZlib reports whether the ELF object at path loads a shared zlib
// (DT_NEEDED libz.so.*), whose functions are probed where it is mapped.
func needsZlib(path string) bool {
	f, done, err := openELF(path)
	if err != nil {
		return false
	}
	defer done()
	libs, _ := f.ImportedLibraries()
	for _, l := range libs {
		if strings.HasPrefix(l, "libz.so") {
			return true
		}
	}
	return false
}

// openELF opens the ELF object at path as a target's file is opened
// (procfs.OpenFile); done closes it.
func openELF(path string) (f *elf.File, done func(), err error) {
	r, err := procfs.OpenFile(nil, path, procfs.ObjectLimits)
	if err != nil {
		return nil, nil, err
	}
	if f, err = elf.NewFile(r); err != nil {
		r.Close()
		return nil, nil, err
	}
	return f, func() { r.Close() }, nil
}

func definesAll(obj interface{ Lookup(string) (uint64, bool) }, specs []uprobe.Spec) bool {
	return missing(obj, specs) == ""
}

func missing(obj interface{ Lookup(string) (uint64, bool) }, specs []uprobe.Spec) string {
	var out []string
	for _, s := range specs {
		if _, ok := obj.Lookup(s.Symbol); !ok {
			out = append(out, s.Symbol)
		}
	}
	return strings.Join(out, ", ")
}

func definesAny(obj interface{ Lookup(string) (uint64, bool) }, calls []track.Call) bool {
	for _, c := range calls {
		if _, ok := obj.Lookup(c.Function); ok {
			return true
		}
	}
	return false
}

// untracedPairs warns about declared pairs whose library the target never
// loaded: nothing of that kind was traced, which a report must say.
func (t *Tracer) untracedPairs() {
	for i, p := range t.opts.Track {
		if len(t.res.pairs[i]) > 0 || p.FallbackFor != "" {
			continue // a fallback is needed only where it was probed
		}
		if p.Optional {
			t.warnOnce(fmt.Sprintf("preset %s: %s is not loaded in the target (or lacks %s); kind %s was not traced", p.Preset, p.Library, p.Acquire[0].Function, p.Kind))
		} else {
			t.warnOnce(fmt.Sprintf("--track %s: %s is not loaded in the target (or lacks %s); nothing of that kind was traced", p.Kind, p.Library, p.Acquire[0].Function))
		}
	}
}

// jvmTarget reports whether the target is traced as a JVM: preset jvm is
// on (forTarget, becomeJVMLocked), with its JNI zlib fallback pairs.
func (t *Tracer) jvmTarget() bool {
	for _, p := range t.opts.Track {
		if p.FallbackFor == "zlib" {
			return true
		}
	}
	return false
}

// kind names a kernel kind: built in, or a declared pair's.
func (t *Tracer) kind(k uint32) analyze.Kind {
	if k >= kernel.KindUser {
		if i := int(k - kernel.KindUser); i < len(t.opts.Track) {
			return analyze.Kind(t.opts.Track[i].Kind)
		}
	}
	return kindName(k)
}

// isJVM reports whether a target is a JVM: its objects include libjvm.so
// (mapped, for Attach) or the java launcher's libjli.so (start-up objects,
// for Launch; libjvm.so is loaded later).
func isJVM(objects []string) bool {
	for _, o := range objects {
		base := o[strings.LastIndex(o, "/")+1:]
		if strings.HasPrefix(base, "libjvm.so") || strings.HasPrefix(base, "libjli.so") {
			return true
		}
	}
	return false
}

// withoutAllocator lets a target none of whose objects exports malloc
// (a static Go program) be traced for what needs no allocator: with
// Options.Maps, malloc is off and the capture says why; otherwise err,
// with a hint. Any other error stands.
func withoutAllocator(opts Options, err error) (Options, error) {
	if !errors.Is(err, ErrNoAllocator) {
		return opts, err
	}
	if !opts.Maps {
		return opts, fmt.Errorf("%w; --maps traces its mappings and threads without one", err)
	}
	opts.noAllocator = "no allocator: " + err.Error()
	return opts, nil
}

// forTarget completes opts for a target with these objects: preset jvm
// for a JVM, and --malloc auto decided (off for a JVM).
func forTarget(opts Options, objects []string) Options {
	jvm := isJVM(objects)
	opts = withJVMPresets(opts, jvm)
	switch {
	case opts.noAllocator != "":
		opts.Malloc, opts.mallocWhy = MallocOff, opts.noAllocator
		return opts
	}
	switch opts.Malloc {
	case MallocOn, MallocOff:
		opts.mallocWhy = "--malloc " + opts.Malloc
	default:
		opts.Malloc, opts.mallocWhy = MallocOn, "--malloc auto"
		if jvm {
			opts.Malloc, opts.mallocWhy = MallocOff, "--malloc auto: JVM target"
		}
	}
	return opts
}

// withJVMPresets turns on preset jvm (kind jvm.direct) for a JVM target
// (libjvm.so is probed once mapped), unless the user declared jvm.direct.
func withJVMPresets(opts Options, jvm bool) Options {
	for _, p := range opts.Track {
		if p.Kind == "jvm.direct" {
			return opts
		}
	}
	if ps, err := track.PresetPairs("jvm"); jvm && err == nil {
		opts.Track = append(append([]track.Pair{}, opts.Track...), ps...)
	}
	return opts
}
