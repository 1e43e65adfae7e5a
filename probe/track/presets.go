package track

import (
	"fmt"
	"sort"
	"strings"
)

// presets are the pairs users turn on by name (--track preset:NAME).
// zlib is built in and on by default; naming it is accepted.
var presets = map[string][]Pair{
	"zlib": nil,
	"bzip2": {
		{Kind: "bzip2.compress", Library: "libbz2.so",
			Acquire: []Call{{"BZ2_bzCompressInit", Handle{Arg, 1}, 0}},
			Release: []Call{{"BZ2_bzCompressEnd", Handle{Arg, 1}, 0}}},
		{Kind: "bzip2.decompress", Library: "libbz2.so",
			Acquire: []Call{{"BZ2_bzDecompressInit", Handle{Arg, 1}, 0}},
			Release: []Call{{"BZ2_bzDecompressEnd", Handle{Arg, 1}, 0}}},
	},
	"stdio": {
		{Kind: "stdio.file", Library: "libc.so",
			Acquire: []Call{{"fopen", Handle{Kind: Ret}, 0}, {"fopen64", Handle{Kind: Ret}, 0}, {"fdopen", Handle{Kind: Ret}, 0},
				{"freopen", Handle{Reopen, 3}, 0}, {"freopen64", Handle{Reopen, 3}, 0}},
			Release: []Call{{"fclose", Handle{Arg, 1}, 0}}},
	},
	"dirent": {
		{Kind: "dirent.dir", Library: "libc.so",
			Acquire: []Call{{"opendir", Handle{Kind: Ret}, 0}, {"fdopendir", Handle{Kind: Ret}, 0}},
			Release: []Call{{"closedir", Handle{Arg, 1}, 0}}},
	},
	// jvm is HotSpot's native direct memory: sun.misc.Unsafe.allocateMemory
	// and ByteBuffer.allocateDirect end in Unsafe_AllocateMemory0 (local
	// symbols of libjvm.so, in .symtab). Probe turns it on for JVM targets.
	// Unsafe_ReallocateMemory0 returns 0 on failure and keeps the old block:
	// with its size argument known (malloc not traced) the kernel keeps it
	// counted (realloc's rule, result_addr); with malloc traced reopen3
	// releases it (Java then throws OutOfMemoryError).
	// The sizes (argument 3, argument 4) are what os::malloc and
	// os::realloc are asked for, used when malloc is not traced.
	//
	// A JDK built with its own zlib (--with-zlib=bundled) hides it inside
	// libzip.so, with no zlib symbol to probe: java.util.zip's JNI entry
	// points stand in for it there (init returns the z_stream, end takes
	// it as its third argument), and nowhere else.
	"jvm": {
		{Kind: "jvm.direct", Library: "libjvm.so",
			Acquire: []Call{{"Unsafe_AllocateMemory0", Handle{Kind: Ret}, 3}, {"Unsafe_ReallocateMemory0", Handle{Reopen, 3}, 4}},
			Release: []Call{{"Unsafe_FreeMemory0", Handle{Arg, 3}, 0}}},
		{Kind: "zlib.inflate", Library: "libzip.so", FallbackFor: "zlib",
			Acquire: []Call{{"Java_java_util_zip_Inflater_init", Handle{Kind: Ret}, 0}},
			Release: []Call{{"Java_java_util_zip_Inflater_end", Handle{Arg, 3}, 0}}},
		{Kind: "zlib.deflate", Library: "libzip.so", FallbackFor: "zlib",
			Acquire: []Call{{"Java_java_util_zip_Deflater_init", Handle{Kind: Ret}, 0}},
			Release: []Call{{"Java_java_util_zip_Deflater_end", Handle{Arg, 3}, 0}}},
	},
	"openssl": {
		{Kind: "openssl.ssl", Library: "libssl.so",
			Acquire: []Call{{"SSL_new", Handle{Kind: Ret}, 0}},
			Release: []Call{{"SSL_free", Handle{Arg, 1}, 0}}},
		{Kind: "openssl.cipher_ctx", Library: "libcrypto.so",
			Acquire: []Call{{"EVP_CIPHER_CTX_new", Handle{Kind: Ret}, 0}},
			Release: []Call{{"EVP_CIPHER_CTX_free", Handle{Arg, 1}, 0}}},
	},
}

// Presets lists the preset names.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PresetPairs returns the pairs of a preset, marked optional.
func PresetPairs(name string) ([]Pair, error) {
	ps, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("unknown preset %q: use one of %s", name, strings.Join(Presets(), ", "))
	}
	out := make([]Pair, len(ps))
	for i, p := range ps {
		p.Preset, p.Optional = name, true
		out[i] = p
	}
	return out, nil
}
