package symbolize

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DebugInfo says whether an object still misses a debug file, for a
// report to tell why its frames are unnamed.
type DebugInfo struct {
	// Missing is set when the object has no .symtab or no DWARF of its
	// own and no local debug file supplied them.
	Missing bool
	// Asked is set once Symbolize needed the debug file: a fetch was
	// queued, or Err says why none was.
	Asked bool
	// Pending is set while the fetch is queued or running.
	Pending bool
	// Path is the file a fetch supplied, "" until then.
	Path string
	// Err is why no file was fetched: ErrNoDebuginfod when no server is
	// configured.
	Err error
}

// debugState is an object's fetch, guarded by its mu.
type debugState struct {
	mu      sync.Mutex
	asked   bool
	pending bool
	path    string
	err     error
}

// fetchedNames is what a debug file fetched after load supplies: symbols
// when the object had no .symtab, lines when it had no DWARF (nil for
// what the object had already).
type fetchedNames struct {
	syms  *symtab
	lines *lineIndex
}

// Debuginfo returns the state of the object's debug file.
func (o *Object) Debuginfo() DebugInfo {
	o.debug.mu.Lock()
	defer o.debug.mu.Unlock()
	return DebugInfo{
		Missing: o.wantDebug && o.fetched.Load() == nil,
		Asked:   o.debug.asked,
		Pending: o.debug.pending,
		Path:    o.debug.path,
		Err:     o.debug.err,
	}
}

// Fetched reports whether a debug file fetched after the object was
// opened names its code: names and lines from Symbolize may differ from
// those returned before.
func (o *Object) Fetched() bool { return o.fetched.Load() != nil }

// askDebug queues the fetch of the object's debug file, once.
func (o *Object) askDebug() {
	o.debug.mu.Lock()
	defer o.debug.mu.Unlock()
	if o.debug.asked {
		return
	}
	o.debug.asked = true
	if o.cache == nil || !o.cache.fetch.request(o) {
		o.debug.err = ErrNoDebuginfod
		return
	}
	o.debug.pending = true
}

// fetcher fetches the debug files of a Cache's objects, one at a time in
// a goroutine of its own: a snapshot never waits for a server.
type fetcher struct {
	mu      sync.Mutex
	src     *Debuginfod // nil: none configured
	ctx     context.Context
	cancel  context.CancelFunc
	queue   []*Object
	idle    chan struct{} // closed when the goroutine ends; nil when none runs
	stopped bool
	gen     atomic.Uint64 // objects that gained names
}

// request queues o; false when no server is configured.
func (f *fetcher) request(o *Object) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.src == nil || f.stopped {
		return false
	}
	f.queue = append(f.queue, o)
	if f.idle == nil {
		f.idle = make(chan struct{})
		go f.run(f.idle)
	}
	return true
}

func (f *fetcher) run(idle chan struct{}) {
	defer close(idle)
	for {
		f.mu.Lock()
		if len(f.queue) == 0 || f.stopped {
			f.idle = nil
			f.mu.Unlock()
			return
		}
		o := f.queue[0]
		f.queue = f.queue[1:]
		src, ctx := f.src, f.ctx
		f.mu.Unlock()

		path, err := src.Fetch(ctx, o.BuildID)
		if err == nil {
			err = o.useDebugFile(path)
		}
		o.debug.mu.Lock()
		o.debug.pending = false
		if err == nil {
			o.debug.path = path
		} else {
			o.debug.err = err
		}
		o.debug.mu.Unlock()
		if err == nil {
			f.gen.Add(1)
		}
	}
}

// wait waits at most timeout for the queued fetches; it reports whether
// none is left.
func (f *fetcher) wait(timeout time.Duration) bool {
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	if idle == nil {
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// stop abandons the fetches and waits for the goroutine: afterwards no
// object is changed.
func (f *fetcher) stop() {
	f.mu.Lock()
	f.stopped = true
	idle := f.idle
	if f.cancel != nil {
		f.cancel()
	}
	for _, o := range f.queue {
		o.debug.mu.Lock()
		o.debug.pending = false
		o.debug.err = errors.New("debuginfod: abandoned when the capture ended")
		o.debug.mu.Unlock()
	}
	f.queue = nil
	f.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

// useDebugFile reads the debug file at path and makes what it has that
// the object lacks the object's.
func (o *Object) useDebugFile(path string) error {
	d := openDebugFile(path, o.Path, func(d *debugFile) bool { return matchBuildID(d, o.BuildID) })
	if d == nil {
		return fmt.Errorf("debuginfod: %s is not the debug file of %s", path, o.Path)
	}
	var names fetchedNames
	err := safely("debug file "+path, func() error {
		if o.needSyms {
			if s, err := d.elf.Symbols(); err == nil && len(s) > 0 {
				var dyn []elf.Symbol
				if ef, err := elf.NewFile(o.file); err == nil {
					dyn, _ = ef.DynamicSymbols()
				}
				t := newSymtab(s, dyn)
				names.syms = &t
			}
		}
		if o.needLines && hasDWARF(d.elf) {
			names.lines = &lineIndex{elf: d.elf, debug: d}
		}
		return nil
	})
	if err != nil || (names.syms == nil && names.lines == nil) {
		d.close()
		if err == nil {
			err = fmt.Errorf("debuginfod: %s adds no symbols or lines to %s", path, o.Path)
		}
		return err
	}
	if names.lines == nil {
		d.close()
	}
	o.fetched.Store(&names)
	return nil
}
