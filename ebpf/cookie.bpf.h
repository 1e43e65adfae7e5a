/* Decoding attach cookies, whose layout is enum cookie_layout in
 * leakscope.h (probe/kernel/cookie_linux.go encodes them). BPF-only. */
#ifndef COOKIE_BPF_H
#define COOKIE_BPF_H

#include "leakscope.h"
#include "arch.bpf.h"

static __always_inline __u32 cookie_field(__u64 c, __u32 shift, __u32 bits)
{
	return (__u32)((c >> shift) & ((1ULL << bits) - 1));
}

/* zlib_cookie_decode reads a zlib init program's cookie. */
static __always_inline struct zlib_cookie zlib_cookie_decode(__u64 c)
{
	struct zlib_cookie z = {
		.state = cookie_field(c, ZCOOKIE_STATE_SHIFT, ZCOOKIE_STATE_BITS),
		.init = cookie_field(c, ZCOOKIE_INIT_SHIFT, ZCOOKIE_INIT_BITS),
	};
	return z;
}

/* pair_cookie_decode reads a declared pair program's cookie. */
static __always_inline struct pair_cookie pair_cookie_decode(__u64 c)
{
	struct pair_cookie p = {
		.kind = cookie_field(c, COOKIE_KIND_SHIFT, COOKIE_KIND_BITS),
		.op = cookie_field(c, COOKIE_OP_SHIFT, COOKIE_OP_BITS),
		.arg = cookie_field(c, COOKIE_ARG_SHIFT, COOKIE_ARG_BITS),
		.size_arg = cookie_field(c, COOKIE_SIZE_ARG_SHIFT, COOKIE_SIZE_ARG_BITS),
		.zwindow = cookie_field(c, COOKIE_ZWINDOW_SHIFT, COOKIE_ZWINDOW_BITS),
		.bytes = cookie_field(c, COOKIE_BYTES_SHIFT, COOKIE_BYTES_BITS),
	};
	return p;
}

/* alloc_cookie_decode reads alloc_session's cookie. */
static __always_inline struct alloc_cookie alloc_cookie_decode(__u64 c)
{
	struct alloc_cookie a = {
		.fn = cookie_field(c, ACOOKIE_FN_SHIFT, ACOOKIE_FN_BITS),
		.reg = {
			cookie_field(c, ACOOKIE_ARG1_SHIFT, ACOOKIE_ARG_BITS),
			cookie_field(c, ACOOKIE_ARG2_SHIFT, ACOOKIE_ARG_BITS),
			cookie_field(c, ACOOKIE_ARG3_SHIFT, ACOOKIE_ARG_BITS),
		},
	};
	return a;
}

#endif /* COOKIE_BPF_H */
