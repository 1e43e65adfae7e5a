package symbolize

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"time"
)

// Cache parses each ELF object once. Objects are keyed by build ID, so libc
// reached through /lib, /usr/lib and /proc/PID/root of several containers
// is one Object; objects without a build ID are keyed by path, size and
// modification time. A Cache is safe for concurrent use. It keeps every
// object's file open until Close.
type Cache struct {
	mu      sync.Mutex
	byID    map[string]*Object
	byFile  map[fileKey]*Object
	objects []*Object
	fetch   fetcher // debug files from debuginfod; see UseDebuginfod
}

// fileKey identifies a file without reading it, so a second request for
// the same path does not even parse the ELF header.
type fileKey struct {
	path    string
	size    int64
	mtimeNS int64
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{byID: map[string]*Object{}, byFile: map[fileKey]*Object{}}
}

// procPath matches paths that reach a process's files through /proc, as
// procfs.ObjectPath returns them.
var procPath = regexp.MustCompile(`^/proc/(\d+)/(?:root|map_files)(?:/|$)`)

// Object returns the object at path, parsing it on first use. When path is
// under /proc/PID/root or /proc/PID/map_files (as procfs.ObjectPath
// returns), separate debug files are searched in the target's filesystem
// before the host's; see ObjectIn.
func (c *Cache) Object(path string) (*Object, error) {
	root := ""
	if m := procPath.FindStringSubmatch(path); m != nil {
		root = "/proc/" + m[1] + "/root"
	}
	return c.ObjectIn(root, path)
}

// ObjectIn is Object with the target's filesystem root given explicitly:
// root is prefixed to /usr/lib/debug when searching for separate debug
// files, before the host's /usr/lib/debug is tried. Use "" for a target
// that shares the host's filesystem. path is opened as given.
func (c *Cache) ObjectIn(root, path string) (*Object, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err // *PathError: "stat <path>: ..."
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("open %s: not a regular file", path)
	}
	key := fileKey{path: path, size: st.Size(), mtimeNS: st.ModTime().UnixNano()}

	// One lock for the whole load: parsing the same library twice in
	// parallel would cost more than waiting.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		return nil, errors.New("symbolize cache is closed")
	}
	if o := c.byFile[key]; o != nil {
		return o, nil
	}
	o, err := openObject(path, root, func(id string) *Object {
		if id == "" {
			return nil
		}
		return c.byID[id]
	})
	if err != nil {
		return nil, err
	}
	c.byFile[key] = o
	if o.cache == nil {
		o.cache = c
	}
	if o.BuildID != "" {
		if _, ok := c.byID[o.BuildID]; ok {
			return o, nil // an alias of a loaded object
		}
		c.byID[o.BuildID] = o
	}
	c.objects = append(c.objects, o)
	return o, nil
}

// Close closes every object's files. Objects stay usable for what was
// already read (symbols, and line tables already built) but can no longer
// read code: afterwards CallPrecedes reports false and FramePointerShare
// returns 0, 0 unless it was computed before. Do not call it while
// another goroutine still queries the cache's objects.
func (c *Cache) Close() error {
	c.fetch.stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.objects {
		o.close()
	}
	c.objects, c.byID, c.byFile = nil, nil, nil
	return nil
}

// UseDebuginfod makes d the source of the debug files the cache's objects
// lack (nil: none). An object asks for its file the first time Symbolize
// needs it; the file is fetched in the background and names the object's
// code once it arrived (see Fetched). Call it before symbolizing.
func (c *Cache) UseDebuginfod(d *Debuginfod) {
	f := &c.fetch
	f.mu.Lock()
	defer f.mu.Unlock()
	f.src = d
	if f.ctx == nil {
		f.ctx, f.cancel = context.WithCancel(context.Background())
	}
}

// DebugGeneration counts the objects that gained names from a fetched
// debug file: when it changed, names returned before may be better now.
func (c *Cache) DebugGeneration() uint64 { return c.fetch.gen.Load() }

// WaitDebug waits at most timeout for the debug files being fetched, and
// reports whether none is left to wait for.
func (c *Cache) WaitDebug(timeout time.Duration) bool { return c.fetch.wait(timeout) }
