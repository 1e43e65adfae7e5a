package analyze

import (
	"regexp"
	"slices"
	"testing"
)

func TestCulprit(t *testing.T) {
	fr := func(fn, module, file string) *Frame { return &Frame{Function: fn, Module: module, File: file} }
	libc := "/usr/lib/x86_64-linux-gnu/libc.so.6"
	stdcxx := "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
	app := "/srv/app"
	jit := "[jit]"
	for _, tt := range []struct {
		name  string
		stack []*Frame
		skip  string
		want  string // the culprit's function, or module when unnamed
	}{
		{"C through xmalloc", []*Frame{fr("xmalloc", app, "x.c"), fr("parse_header", app, "p.c"), fr("main", app, "m.c")}, "", "parse_header"},
		{"C++ operator new in a stripped libstdc++", []*Frame{{Module: stdcxx, Offset: 0x9abc}, fr("Cache::put(std::string const&)", app, "cache.cc")}, "", "Cache::put(std::string const&)"},
		{"C++ template with its return type", []*Frame{fr("operator new(unsigned long)", stdcxx, ""), fr("void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int, std::allocator<int> > >, int const&)", app, "vector.tcc"), fr("grow_table(int)", app, "t.cc")}, "", "grow_table(int)"},
		{"an app method taking std:: arguments stays", []*Frame{fr("malloc", libc, ""), fr("Cache::put(int, std::string const&)", app, "c.cc")}, "", "Cache::put(int, std::string const&)"},
		{"C++ vector storage", []*Frame{fr("operator new(unsigned long)", stdcxx, ""), fr("std::vector<int, std::allocator<int> >::_M_realloc_insert(int const&)", app, "v.h"), fr("Loader::load()", app, "l.cc")}, "", "Loader::load()"},
		{"JVM through the JDK", []*Frame{fr("Java_java_util_zip_Inflater_init", "/usr/lib/jvm/x/lib/libzip.so", ""), fr("java.util.zip.Inflater.init", jit, "Inflater.java"), fr("java.util.zip.Inflater.<init>", jit, "Inflater.java"), fr("java.util.zip.GZIPInputStream.<init>", jit, "GZIPInputStream.java"), fr("KafkaRecovery.recoverSegment", jit, "KafkaRecovery.java")}, "", "KafkaRecovery.recoverSegment"},
		{"JVM direct memory", []*Frame{fr("Unsafe_AllocateMemory0", "/usr/lib/jvm/x/lib/server/libjvm.so", ""), fr("jdk.internal.misc.Unsafe.allocateMemory", jit, "Unsafe.java"), fr("java.nio.DirectByteBuffer.<init>", jit, "DirectByteBuffer.java"), fr("com.example.Cache.put", jit, "Cache.java")}, "", "com.example.Cache.put"},
		{"Netty's pooled allocator", []*Frame{fr("jdk.internal.misc.Unsafe.allocateMemory0", jit, "Unsafe.java"), fr("java.nio.ByteBuffer.allocateDirect", jit, "ByteBuffer.java"), fr("io.netty.buffer.PoolArena$DirectArena.allocateDirect", jit, "PoolArena.java"), fr("io.netty.buffer.PoolArena$DirectArena.newChunk", jit, "PoolArena.java"), fr("io.netty.buffer.PooledByteBufAllocator.newDirectBuffer", jit, "PooledByteBufAllocator.java"), fr("io.netty.buffer.AbstractByteBufAllocator.directBuffer", jit, "AbstractByteBufAllocator.java"), fr("NettyBookie.readEntry", jit, "NettyBookie.java")}, "", "NettyBookie.readEntry"},
		{"Netty unpooled, no Cleaner", []*Frame{fr("jdk.internal.misc.Unsafe.allocateMemory", jit, "Unsafe.java"), fr("io.netty.util.internal.PlatformDependent0.allocateDirectNoCleaner", jit, "PlatformDependent0.java"), fr("io.netty.buffer.UnpooledUnsafeNoCleanerDirectByteBuf.allocateDirect", jit, "UnpooledUnsafeNoCleanerDirectByteBuf.java"), fr("io.netty.buffer.UnpooledByteBufAllocator.newDirectBuffer", jit, "UnpooledByteBufAllocator.java"), fr("NettyBookie.addEntry", jit, "NettyBookie.java")}, "", "NettyBookie.addEntry"},
		{"Netty's codecs stay", []*Frame{fr("io.netty.buffer.PooledByteBufAllocator.newDirectBuffer", jit, "PooledByteBufAllocator.java"), fr("io.netty.handler.codec.ByteToMessageDecoder.channelRead", jit, "ByteToMessageDecoder.java")}, "", "io.netty.handler.codec.ByteToMessageDecoder.channelRead"},
		{"Go through cgo and database/sql", []*Frame{fr("sqlite3MemMalloc", app, "sqlite3-binding.c"), fr("sqlite3Malloc", app, "sqlite3-binding.c"), fr("sqlite3_prepare_v2", app, "sqlite3-binding.c"), fr("_cgo_7f_Cfunc__sqlite3_prepare_v2", app, ""), fr("runtime.asmcgocall", app, "asm_amd64.s"), fr("github.com/mattn/go-sqlite3._Cfunc__sqlite3_prepare_v2", app, "_cgo_gotypes.go"), fr("github.com/mattn/go-sqlite3.(*SQLiteConn).prepare", app, "sqlite3.go"), fr("database/sql.(*DB).prepareDC", app, "sql.go"), fr("main.leakStatements", app, "main.go")}, "", "github.com/mattn/go-sqlite3.(*SQLiteConn).prepare"},
		{"SQLite's static functions", []*Frame{fr("sqlite3MemMalloc", app, "/root/go/pkg/mod/github.com/mattn/go-sqlite3@v1.14.53/sqlite3-binding.c"), fr("dbMallocRawFinish", app, "/root/go/pkg/mod/github.com/mattn/go-sqlite3@v1.14.53/sqlite3-binding.c"), fr("growOpArray.constprop.0", app, "/root/go/pkg/mod/github.com/mattn/go-sqlite3@v1.14.53/sqlite3-binding.c"), fr("yy_reduce.constprop.0", app, "/src/sqlite/sqlite3.c"), fr("_cgo_7f_Cfunc__sqlite3_prepare_v2_internal", app, "sqlite3.go"), fr("github.com/mattn/go-sqlite3.(*SQLiteConn).prepare", app, "sqlite3.go"), fr("main.cacheQueries", app, "main.go")}, "", "github.com/mattn/go-sqlite3.(*SQLiteConn).prepare"},
		{"a program's own sqlite3_helpers.c stays", []*Frame{fr("malloc", libc, ""), fr("cache_row", app, "/src/sqlite3_helpers.c")}, "", "cache_row"},
		{"Go, with the driver skipped too", []*Frame{fr("sqlite3Malloc", app, "s.c"), fr("github.com/mattn/go-sqlite3.(*SQLiteConn).prepare", app, "sqlite3.go"), fr("database/sql.(*DB).prepareDC", app, "sql.go"), fr("main.leakStatements", app, "main.go")}, `^github\.com/mattn/go-sqlite3\.`, "main.leakStatements"},
		{"Go main and a dotted module stay", []*Frame{fr("runtime.mallocgc", app, "malloc.go"), fr("encoding/json.Marshal", app, "encode.go"), fr("example.com/app/store.Put", app, "store.go")}, "", "example.com/app/store.Put"},
		{"zlib statically linked (node)", []*Frame{fr("zcalloc", "/usr/bin/node", "zutil.c"), fr("inflateInit2_", "/usr/bin/node", "inflate.c"), fr("node::ZlibContext::Init()", "/usr/bin/node", "node_zlib.cc")}, "", "node::ZlibContext::Init()"},
		{"an unnamed frame of the program is its own", []*Frame{fr("malloc", libc, ""), {Module: app, Offset: 0x1234}}, "", app},
		{"a C function named like a Go package is kept", []*Frame{fr("malloc", libc, ""), fr("net.connect", app, "conn.c")}, "", "net.connect"},
		{"everything skipped: none", []*Frame{fr("malloc", libc, ""), fr("__libc_start_call_main", libc, "")}, "", ""},
	} {
		var skip *regexp.Regexp
		if tt.skip != "" {
			skip = regexp.MustCompile(tt.skip)
		}
		f, ok := NewCulprits(skip).Find(Stack{Frames: tt.stack})
		got := f.Function
		if got == "" {
			got = f.Module
		}
		if !ok {
			got = ""
		}
		if got != tt.want {
			t.Errorf("%s: culprit %q, want %q", tt.name, got, tt.want)
		}
	}
}

// In a Go program whose main module is known, its own code is the culprit
// past its dependencies' (a driver's prepare), when a frame of it follows;
// each process of a capture is its own program.
func TestCulpritGoMainModule(t *testing.T) {
	fr := func(fn, file string) *Frame { return &Frame{Function: fn, Module: "/srv/app", File: file} }
	driver := []*Frame{fr("sqlite3MemMalloc", "sqlite3-binding.c"), fr("_cgo_7f_Cfunc__sqlite3_prepare_v2", ""),
		fr("runtime.asmcgocall", "asm_amd64.s"), fr("github.com/mattn/go-sqlite3.(*SQLiteConn).prepare.func2", "sqlite3.go"),
		fr("github.com/mattn/go-sqlite3.(*SQLiteConn).prepare", "sqlite3.go"), fr("database/sql.(*DB).prepareDC", "sql.go")}
	for _, tt := range []struct {
		name, module string
		stack        []*Frame
		want         string
	}{
		{"main package past the driver", "gosqlite", append(slices.Clone(driver), fr("main.cacheQueries", "main.go"), fr("main.main", "main.go")), "main.cacheQueries"},
		{"the main module's own package past the driver", "example.com/app", append(slices.Clone(driver), fr("example.com/app/store.(*Cache).Prepare", "store.go"), fr("main.main", "main.go")), "example.com/app/store.(*Cache).Prepare"},
		{"a generic function of the main module", "example.com/app", append(slices.Clone(driver), fr("example.com/app/store.Get[go.shape.string,github.com/x/y.T]", "store.go")), "example.com/app/store.Get[go.shape.string,github.com/x/y.T]"},
		{"a dependency's generic function over the main module's type", "example.com/app", append(slices.Clone(driver[:3]), fr("github.com/x/y.Put[example.com/app/store.T]", "y.go"), fr("example.com/app/store.Save", "store.go")), "example.com/app/store.Save"},
		{"only a dependency's code: the dependency", "example.com/app", driver, "github.com/mattn/go-sqlite3.(*SQLiteConn).prepare.func2"},
		{"module unknown: the first Go frame", "", append(slices.Clone(driver), fr("main.cacheQueries", "main.go")), "github.com/mattn/go-sqlite3.(*SQLiteConn).prepare.func2"},
		{"the program's own C code stays", "example.com/app", []*Frame{fr("malloc", ""), fr("conn_buffer", "conn.c"), fr("main.open", "main.go")}, "conn_buffer"},
	} {
		c := &Capture{Target: Target{Pid: 10, GoModule: tt.module}, Processes: []Target{{Pid: 11}}}
		cs := NewCulprits(nil).In(c)
		f, _ := cs.FindSite(&Site{Stack: Stack{Frames: tt.stack}})
		if f.Function != tt.want {
			t.Errorf("%s: culprit %q, want %q", tt.name, f.Function, tt.want)
		}
		// Another process of the capture, whose module is not known: the
		// first frame no rule skips.
		want, _ := NewCulprits(nil).Find(Stack{Frames: tt.stack})
		if f, _ := cs.FindSite(&Site{Pid: 11, Stack: Stack{Frames: tt.stack}}); f.Function != want.Function {
			t.Errorf("%s, in process 11: culprit %q, want %q", tt.name, f.Function, want.Function)
		}
	}
}
