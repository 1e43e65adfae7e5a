package track

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// HandleKind says where a call's handle is.
type HandleKind int

// Where a handle can be.
const (
	// Ret: the return value is the handle; NULL means the acquire failed.
	Ret HandleKind = iota
	// Arg: argument N is the handle. For an acquire, an int return of 0
	// means success (zlib's Z_OK, bzip2's BZ_OK).
	Arg
	// Out: argument N points to where the acquire stores the handle; an int
	// return of 0 means success (posix_memalign style).
	Out
	// Reopen: the return value is the new handle and argument N the old
	// one, released by the call whether it succeeds or not (freopen).
	Reopen
)

// Handle is where one call finds its handle.
type Handle struct {
	Kind HandleKind
	Arg  int // 1-based argument index for Arg, Out and Reopen
}

func (h Handle) String() string {
	switch h.Kind {
	case Arg:
		return fmt.Sprintf("arg%d", h.Arg)
	case Out:
		return fmt.Sprintf("out%d", h.Arg)
	case Reopen:
		return fmt.Sprintf("reopen%d", h.Arg)
	}
	return "ret"
}

// Call is one function of a pair and where its handle is.
type Call struct {
	Function string
	Handle   Handle
	// SizeArg, for an acquire, is the 1-based argument that holds the
	// bytes acquired. Those bytes are the resource's when the malloc
	// family is not traced (otherwise the mallocs inside the call are).
	// 0: none. Set by presets only.
	SizeArg int
}

func (c Call) String() string { return c.Function + "/" + c.Handle.String() }

// Pair is one kind of resource: the calls that acquire it and the calls
// that release it, in one library.
type Pair struct {
	Kind     string // report kind, e.g. "stdio.file"
	Library  string // object that holds the functions: a path, a file-name prefix ("libbz2.so"), or "*" for any
	Acquire  []Call
	Release  []Call
	Preset   string // preset it came from, "" when declared by the user
	Optional bool   // true for presets: a library the target does not load is not an error
	// FallbackFor names a built-in tracker this pair stands in for:
	// "zlib" pairs are probed in an object only when its zlib cannot be
	// (the object has no zlib function to probe and needs no shared
	// libz), so no stream is counted twice.
	FallbackFor string
}

// String renders p in the --track syntax, which Parse reads back.
func (p Pair) String() string {
	var acq, rel []string
	for _, c := range p.Acquire {
		acq = append(acq, c.String())
	}
	for _, c := range p.Release {
		rel = append(rel, c.String())
	}
	return fmt.Sprintf("%s=%s:%s:%s", p.Kind, p.Library, strings.Join(acq, "+"), strings.Join(rel, "+"))
}

// MaxArg is the highest argument index a handle can be read from: the
// x86-64 and arm64 ABIs pass six or more in registers.
const MaxArg = 6

var (
	kindRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	funcRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.@]{0,255}$`)
)

// Reserved kinds are built in and cannot be declared again.
var reserved = map[string]bool{"malloc": true, "zlib.inflate": true, "zlib.deflate": true}

// Parse reads one --track value. It is either a list of presets,
// "preset:stdio,preset:dirent", or one pair:
//
//	KIND=LIBRARY:ACQUIRE[+ACQUIRE...]:RELEASE[+RELEASE...]
//
// where each call is FUNCTION[/HANDLE] and HANDLE is ret, argN, outN or
// reopenN (acquire default ret, release default arg1), e.g.
//
//	pool.conn=libpool.so:pool_get/ret:pool_put/arg1
func Parse(spec string) ([]Pair, error) {
	s := strings.TrimSpace(spec)
	if strings.HasPrefix(s, "preset:") {
		var out []Pair
		for _, item := range strings.Split(s, ",") {
			name, ok := strings.CutPrefix(strings.TrimSpace(item), "preset:")
			if !ok {
				return nil, fmt.Errorf("parse --track %q: mix of presets and a pair; give each in its own --track", spec)
			}
			ps, err := PresetPairs(name)
			if err != nil {
				return nil, fmt.Errorf("parse --track %q: %w", spec, err)
			}
			out = append(out, ps...)
		}
		return out, nil
	}
	p, err := parsePair(s)
	if err != nil {
		return nil, fmt.Errorf("parse --track %q: %w", spec, err)
	}
	return []Pair{p}, nil
}

func parsePair(s string) (Pair, error) {
	kind, rest, ok := strings.Cut(s, "=")
	if !ok {
		return Pair{}, fmt.Errorf("want KIND=LIBRARY:ACQUIRE:RELEASE (e.g. pool.conn=libpool.so:pool_get/ret:pool_put/arg1) or preset:NAME")
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return Pair{}, fmt.Errorf("want LIBRARY:ACQUIRE:RELEASE after %q, got %d part(s)", kind+"=", len(parts))
	}
	p := Pair{Kind: strings.TrimSpace(kind), Library: strings.TrimSpace(parts[0])}
	var err error
	if p.Acquire, err = parseCalls(parts[1], Handle{Kind: Ret}, true); err != nil {
		return Pair{}, fmt.Errorf("acquire: %w", err)
	}
	if p.Release, err = parseCalls(parts[2], Handle{Kind: Arg, Arg: 1}, false); err != nil {
		return Pair{}, fmt.Errorf("release: %w", err)
	}
	return p, p.Validate()
}

func parseCalls(s string, def Handle, acquire bool) ([]Call, error) {
	var calls []Call
	for _, item := range strings.Split(s, "+") {
		fn, h, hasHandle := strings.Cut(strings.TrimSpace(item), "/")
		c := Call{Function: fn, Handle: def}
		if hasHandle {
			var err error
			if c.Handle, err = ParseHandle(h, acquire); err != nil {
				return nil, fmt.Errorf("%s: %w", fn, err)
			}
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// ParseHandle reads ret, argN, outN or reopenN; a release takes only argN.
func ParseHandle(s string, acquire bool) (Handle, error) {
	s = strings.TrimSpace(s)
	if s == "ret" {
		if !acquire {
			return Handle{}, fmt.Errorf("a release finds its handle in an argument: use argN")
		}
		return Handle{Kind: Ret}, nil
	}
	for _, form := range []struct {
		prefix string
		kind   HandleKind
	}{{"arg", Arg}, {"out", Out}, {"reopen", Reopen}} {
		num, ok := strings.CutPrefix(s, form.prefix)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || n > MaxArg {
			return Handle{}, fmt.Errorf("handle %q: argument index must be 1 to %d", s, MaxArg)
		}
		if !acquire && form.kind != Arg {
			return Handle{}, fmt.Errorf("handle %q: a release finds its handle in an argument: use argN", s)
		}
		return Handle{Kind: form.kind, Arg: n}, nil
	}
	return Handle{}, fmt.Errorf("handle %q: use ret, argN, outN or reopenN", s)
}

// Validate checks a pair is usable.
func (p Pair) Validate() error {
	if !kindRE.MatchString(p.Kind) {
		return fmt.Errorf("kind %q: use letters, digits, '.', '_' or '-' (up to 64)", p.Kind)
	}
	if reserved[p.Kind] && !(p.FallbackFor != "" && strings.HasPrefix(p.Kind, p.FallbackFor+".")) {
		return fmt.Errorf("kind %q is built in", p.Kind)
	}
	if p.Library == "" {
		return fmt.Errorf("kind %s: no library: give a path, a file-name prefix such as libfoo.so, or *", p.Kind)
	}
	if len(p.Acquire) == 0 || len(p.Release) == 0 {
		return fmt.Errorf("kind %s: needs at least one acquire and one release function", p.Kind)
	}
	for _, c := range append(append([]Call{}, p.Acquire...), p.Release...) {
		if !funcRE.MatchString(c.Function) {
			return fmt.Errorf("kind %s: function %q is not a symbol name", p.Kind, c.Function)
		}
	}
	return nil
}

// MatchesLibrary reports whether the object at path is the pair's library.
func (p Pair) MatchesLibrary(path string) bool {
	if p.Library == "*" {
		return true
	}
	if strings.HasPrefix(p.Library, "/") {
		return path == p.Library
	}
	base := path[strings.LastIndex(path, "/")+1:]
	return strings.HasPrefix(base, p.Library)
}
