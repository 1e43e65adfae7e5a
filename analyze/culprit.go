package analyze

import (
	"path"
	"regexp"
	"strings"
)

// A culprit rule says which frames are not the program's own code: the
// culprit of a stack is its first frame, leaf first, that no rule skips.
type culpritRule struct {
	// Function, when set, is matched against a frame's whole function
	// name; Module against its object's base name; File (with Function)
	// against its source file, so that a rule holds for one language.
	Function, Module, File string
	Why                    string // what the rule skips, for docs and tests
}

// culpritRules are leakscope's own: allocators and their wrappers (the
// frames GroupFrame looked past), language runtimes and standard
// libraries, and the libraries whose calls leakscope traces. Keep
// docs/json-report.md in step.
var culpritRules = []culpritRule{
	{Function: strings.Join(allocatorFrames, "|"), Why: "an allocator, an allocation wrapper or a runtime's own frame"},
	{Module: `(libc|libm|libpthread|libdl|librt|ld-linux.*|ld-musl.*|libstdc\+\+|libgcc_s|libz|libbz2|libssl|libcrypto|libjemalloc|libtcmalloc.*|libmimalloc)\.so.*`,
		Why: "the C and C++ runtimes, and the libraries leakscope traces"},
	{Module: `(libjvm|libjava|libzip|libnio|libnet|libjli|libverify|libmanagement)\.so`, Why: "the JDK's own native code"},
	{Function: `(java|javax|jdk|sun|com\.sun)\..*`, Why: "the Java standard library"},
	{Function: `io\.netty\.(buffer|util\.internal)\..*`, Why: "Netty's buffer allocators (pooled and unpooled) and their platform glue: the code that asked for the buffer comes after them"},
	{Function: `(Java_|JVM_|jni_|JNI_|Unsafe_).*|JavaCalls::.*|StubRoutines.*|\[interpreted\]|call_stub.*`, Why: "JNI entry points and the JVM's call stubs"},
	// A template function's demangled name begins with its return type.
	{Function: `([\w:<>*&]+ )?(std|__gnu_cxx|__cxxabiv1)::.*`, Why: "the C++ standard library"},
	{Function: `(inflate|deflate)(Init2?_|Reset2?|ResetKeep|SetDictionary|Copy|Prime|Params|Bound)?|(inflate|deflate)_\w+|zcalloc|(un)?compress2?|gz\w+|adler32\w*|crc32\w*`,
		Why: "zlib, statically linked or not"},
	{Function: `sqlite3\w*`, Why: "SQLite's own functions"},
	// Most of SQLite's functions are static (dbMallocRawFinish,
	// growOpArray, yy_reduce): its amalgamation's file names them.
	{Function: `.+`, File: `(.*/)?(sqlite3|sqlite3-binding)\.c`, Why: "SQLite's static functions, by its amalgamation (sqlite3.c; go-sqlite3's sqlite3-binding.c)"},
	// Go's standard library, by its top-level packages, only for Go
	// frames (a .go or .s file): after the package path, a function or method
	// name holds no '/' (github.com/x/y.F does).
	{Function: `(archive|bufio|bytes|cmp|compress|container|context|crypto|database|debug|embed|encoding|errors|expvar|flag|fmt|go|hash|html|image|index|internal|io|iter|log|maps|math|mime|net|os|path|plugin|reflect|regexp|runtime|slices|sort|strconv|strings|structs|sync|syscall|testing|text|time|unicode|unique|unsafe|weak)(/[a-z0-9_]+)*\.[^/]*`,
		File: `.*\.(go|s)`, Why: "the Go standard library (its Go and assembly files)"},
}

// culpritMatcher is culpritRules compiled.
type culpritMatcher struct {
	rules []compiledRule
}

type compiledRule struct {
	function, module, file *regexp.Regexp
}

func anchored(expr string) *regexp.Regexp {
	if expr == "" {
		return nil
	}
	return regexp.MustCompile(`^(?:` + expr + `)$`)
}

var defaultCulprits = func() *culpritMatcher {
	m := &culpritMatcher{}
	for _, r := range culpritRules {
		m.rules = append(m.rules, compiledRule{function: anchored(r.Function), module: anchored(r.Module), file: anchored(r.File)})
	}
	return m
}()

// skips reports whether a rule skips f.
func (m *culpritMatcher) skips(f *Frame) bool {
	for _, r := range m.rules {
		switch {
		case r.module != nil:
			if f.Module != "" && r.module.MatchString(path.Base(f.Module)) {
				return true
			}
		case r.function != nil && f.Function != "":
			if r.function.MatchString(f.Function) && (r.file == nil || r.file.MatchString(f.File)) {
				return true
			}
		}
	}
	return false
}

// Culprits finds the culprits of many stacks, deciding each frame once:
// stacks share their frames (a capture's 100k stacks have far fewer).
// Not safe for concurrent use.
type Culprits struct {
	skip    *regexp.Regexp
	skipped map[*Frame]bool
	// module is the Go program's main module (Target.GoModule) of the
	// stack being looked at: its code is the culprit before its
	// dependencies'; modules, by pid (In).
	module  string
	modules map[int]string
}

// NewCulprits returns a finder with skip as --culprit-skip (nil: none).
func NewCulprits(skip *regexp.Regexp) *Culprits {
	return &Culprits{skip: skip, skipped: map[*Frame]bool{}}
}

// In makes c a finder for the sites of capture cp (FindSite): a Go
// program's culprit is its main module's code past its dependencies' (a
// database driver's, an SDK's), when the stack runs through both; each
// process of the capture is its own program.
func (c *Culprits) In(cp *Capture) *Culprits {
	c.modules = map[int]string{0: cp.Target.GoModule, cp.Target.Pid: cp.Target.GoModule}
	for _, p := range cp.Processes {
		c.modules[p.Pid] = p.GoModule
	}
	return c
}

// FindSite is Find for the stack of site s of the capture given to In.
func (c *Culprits) FindSite(s *Site) (Frame, bool) {
	c.module = c.modules[s.Pid]
	return c.Find(s.Stack)
}

// FindPast is FindSite for the frames of site s after frame i (its
// callers): in a pool's stack, the code that asked the pool. ok is false
// when every one of them is skipped.
func (c *Culprits) FindPast(s *Site, i int) (Frame, bool) {
	c.module = c.modules[s.Pid]
	st := s.Stack
	st.Frames = st.Frames[min(i+1, len(st.Frames)):]
	return c.Find(st)
}

// FindOrSite is FindOr for the stack of site s of the capture given to In.
func (c *Culprits) FindOrSite(s *Site) (Frame, bool) {
	c.module = c.modules[s.Pid]
	return c.FindOr(s.Stack)
}

// goDependency reports whether f is Go code of a module other than the
// program's main module (and not package main): a dependency.
func (c *Culprits) goDependency(f *Frame) bool {
	if c.module == "" || !strings.HasSuffix(f.File, ".go") || strings.HasPrefix(f.Function, "main.") {
		return false
	}
	fn, _, _ := strings.Cut(f.Function, "[") // type arguments name other packages
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return false
	}
	pkg := fn[:slash+1+dot]
	return pkg != c.module && !strings.HasPrefix(pkg, c.module+"/")
}

func (c *Culprits) skips(f *Frame) bool {
	s, ok := c.skipped[f]
	if !ok {
		s = defaultCulprits.skips(f) || c.skip != nil && c.skip.MatchString(frameName(*f))
		c.skipped[f] = s
	}
	return s
}

// Find returns the frame that names who is responsible for a stack:
// its first frame, leaf first, that is the program's own code, walking out
// of allocators and their wrappers (operator new, xmalloc, g_malloc,
// std:: allocators, sqlite3Malloc), language runtimes and standard
// libraries (runtime.*, cgo's glue, java.*, jdk.*, sun.*, JNI entry points,
// libc, libstdc++, Go's standard library) and the libraries whose calls
// are traced (zlib, the JDK's libzip). skip, when set, skips the frames
// whose function (or module base name, when unnamed) it matches too
// (--culprit-skip). A frame of a module no rule names and with no function
// is the program's own. ok is false when every frame is skipped.
//
// In a Go program (For), the frames of its dependencies are looked past
// too when a frame of its own module follows them: a driver's prepare
// function is where the program's call went, not who kept the result.
func (c *Culprits) Find(s Stack) (Frame, bool) {
	var first *Frame
	for _, f := range s.Frames {
		if c.skips(f) {
			continue
		}
		if !c.goDependency(f) {
			if first == nil {
				return *f, true
			}
			if strings.HasSuffix(f.File, ".go") {
				return *f, true // the program's own Go code, past its dependencies'
			}
			continue // C code a dependency calls through, e.g. its callbacks
		}
		if first == nil {
			first = f
		}
	}
	if first != nil {
		return *first, true
	}
	return Frame{}, false
}

// FindOr is Find or, when every frame is skipped, the first frame past
// the allocators (the stack's first if none), so that a stack of library
// frames only (a JVM's own malloc) is named; ok is false only for a stack
// without frames.
func (c *Culprits) FindOr(s Stack) (Frame, bool) {
	if f, ok := c.Find(s); ok {
		return f, true
	}
	for _, f := range s.Frames {
		if f.Function == "" || !allocatorFrame.MatchString(f.Function) {
			return *f, true
		}
	}
	if len(s.Frames) > 0 {
		return *s.Frames[0], true
	}
	return Frame{}, false
}
