//go:build ignore

/* BPF_PROG_TEST_RUN harnesses: each program calls one helper of the
 * headers the probes are built from (state.bpf.h and what includes it),
 * on the same maps and globals, so the helpers are tested on their own
 * (probe/kernel/kernel_linux_test.go). Raw tracepoints: BPF_PROG_TEST_RUN runs
 * them in the calling thread, whose own memory bpf_probe_read_user then
 * reads (a synthetic stack, a fake inflate state), with the tracing
 * helpers the walker needs (bpf_find_vma, bpf_loop). A program's
 * arguments are the test run's context words; its results are its return
 * value, the out_* globals and the maps. Built into
 * probe/internal/bpftest, which only tests import. */

#include "vmlinux.h"
#include "bpf/bpf_helpers.h"
#include "bpf/bpf_tracing.h"

#include "leakscope.h"
#include "state.bpf.h"
#include "cookie.bpf.h"
#include "track.bpf.h"

/* A thread's state for the walker, as task storage would hold it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct thread_state);
} test_threads SEC(".maps");

struct pair_cookie out_pair = {};
struct zlib_cookie out_zlib = {};
struct alloc_cookie out_alloc = {};
__u64 out_u64 = 0;
__u32 out_u32 = 0;

/* test_pair_cookie decodes cookie c into out_pair. */
SEC("raw_tp/test")
int BPF_PROG(test_pair_cookie, __u64 c)
{
	out_pair = pair_cookie_decode(c);
	return 0;
}

/* test_zlib_cookie decodes cookie c into out_zlib. */
SEC("raw_tp/test")
int BPF_PROG(test_zlib_cookie, __u64 c)
{
	out_zlib = zlib_cookie_decode(c);
	return 0;
}

/* test_alloc_cookie decodes cookie c into out_alloc. */
SEC("raw_tp/test")
int BPF_PROG(test_alloc_cookie, __u64 c)
{
	out_alloc = alloc_cookie_decode(c);
	return 0;
}

/* test_site_arg is site_arg for register reg on registers each holding its own
 * byte offset in struct pt_regs: out_u64 names the field reg reads. */
SEC("raw_tp/test")
int BPF_PROG(test_site_arg, __u64 reg)
{
	typedef __u64 __attribute__((may_alias)) word;
	struct pt_regs regs = {};
	word *w = (word *)&regs;
	for (__u32 i = 0; i < sizeof(regs) / sizeof(__u64); i++)
		w[i] = i * sizeof(__u64);
	out_u64 = site_arg(&regs, (__u32)reg);
	return 0;
}

/* test_walk_stack walks the stack of the calling thread from return
 * address ip with frame pointer fp and stack pointer sp (the test's
 * synthetic stack): the stack id in out_u64, the frames in stacks, the
 * bytes of stack it read (thread_state.stack_need) in out_u32. */
SEC("raw_tp/test")
int BPF_PROG(test_walk_stack, __u64 ip, __u64 fp, __u64 sp)
{
	__u32 zero = 0;
	struct thread_state *ts = bpf_map_lookup_elem(&test_threads, &zero);
	if (!ts)
		return -1;
	out_u64 = walk_stack(ts, ip, fp, sp);
	out_u32 = ts->stack_need;
	return 0;
}

/* test_site_for finds or makes the site (stack_id, kind): its slot in
 * out_u32; returns 1 if there is one, 0 when site_slots is full. */
SEC("raw_tp/test")
int BPF_PROG(test_site_for, __u64 stack_id, __u64 kind)
{
	__u32 slot = 0;
	struct site_slot *s = site_for(stack_id, (__u32)kind, &slot);
	out_u32 = slot;
	return s != NULL;
}

/* test_track_alloc is track_alloc: 1 if the handle was recorded. */
SEC("raw_tp/test")
int BPF_PROG(test_track_alloc, __u64 addr, __u64 size, __u64 kind, __u64 stack_id, __u64 ts)
{
	return track_alloc(addr, size, (__u32)kind, stack_id, ts);
}

/* test_track_owned is track_owned: 1 if the block was recorded. */
SEC("raw_tp/test")
int BPF_PROG(test_track_owned, __u64 addr, __u64 size, __u64 owner, __u64 owner_kind, __u64 ts)
{
	return track_owned(addr, size, owner, (__u32)owner_kind, ts);
}

/* test_track_release is track_release: 1 if the handle was live. */
SEC("raw_tp/test")
int BPF_PROG(test_track_release, __u64 addr, __u64 kind)
{
	return track_release(addr, (__u32)kind);
}

/* test_zwindow_owner is zwindow_owner for a malloc of size bytes
 * returning to ip with callee-saved registers 0, 1, 2 and last (by
 * arch_callee_saved: %rbp, %rbx, %r12 and %r15 on x86-64) holding s0,
 * s1, s2 and slast: the owning stream in out_u64. */
SEC("raw_tp/test")
int BPF_PROG(test_zwindow_owner, __u64 ip, __u64 size, __u64 s0, __u64 s1, __u64 s2, __u64 slast)
{
	struct pt_regs regs = {};
	regs.ARCH_IP_FIELD = ip;
	arch_set_callee_saved(&regs, 0, s0);
	arch_set_callee_saved(&regs, 1, s1);
	arch_set_callee_saved(&regs, 2, s2);
	arch_set_callee_saved(&regs, ARCH_CALLEE_SAVED - 1, slast);
	out_u64 = zwindow_owner(&regs, size);
	return 0;
}

/* test_zcall_owner is zcall_owner for a malloc entered at stack pointer
 * sp (its return address at *sp: x86-64's entry), with this thread's last inflate()
 * entered at zsp with return address zret for stream strm: the owner in
 * out_u64. */
SEC("raw_tp/test")
int BPF_PROG(test_zcall_owner, __u64 sp, __u64 zsp, __u64 zret, __u64 strm)
{
	struct pt_regs regs = {};
	regs.ARCH_SP_FIELD = sp;
	struct zcall z = { .strm = strm, .sp = zsp, .ret_addr = zret, .kind = KIND_ZLIB_INFLATE };
	__u32 kind = 0;
	out_u64 = zcall_owner(&regs, &z, &kind);
	out_u32 = kind;
	return 0;
}

/* test_zwindow_settle is zwindow_settle on the record of stream strm of
 * this image; returns -1 if it has none or its window word is clear. */
SEC("raw_tp/test")
int BPF_PROG(test_zwindow_settle, __u64 strm, __u64 kind)
{
	struct alloc_slot *slot;
	struct alloc_info *info = alloc_find(strm, (__u32)kind, &slot);
	if (!info || !(info->owner & WINDOW_PENDING))
		return -1;
	zwindow_settle(strm, (__u32)kind, info);
	return 0;
}

/* test_track_stream is track_alloc_window for an inflate stream whose
 * window is looked for (window_word): 1 if it was recorded. */
SEC("raw_tp/test")
int BPF_PROG(test_track_stream, __u64 strm, __u64 size, __u64 stack_id, __u64 state, __u64 bytes)
{
	return track_alloc_window(strm, size, KIND_ZLIB_INFLATE, stack_id, 1000, state | WINDOW_PENDING, (__u16)bytes);
}

/* test_fill_misses puts up to n records in range_misses, as user space
 * would find them while busy: how many went in. */
SEC("raw_tp/test")
int BPF_PROG(test_fill_misses, __u64 n)
{
	struct range_miss m = { .ip = 1 };
	int sent = 0;
	for (int i = 0; i < 512 && i < (int)n; i++) {
		if (bpf_ringbuf_output(&range_misses, &m, sizeof(m), 0))
			break;
		sent++;
	}
	return sent;
}

/* test_stop_told is stop_told with a record for ip. Run only with
 * range_misses full: otherwise it stops the calling thread's process. */
SEC("raw_tp/test")
int BPF_PROG(test_stop_told, __u64 ip)
{
	struct range_miss m = { .ip = ip };
	return stop_told(&m);
}

/* test_note_range_miss is note_range_miss for a frame at ip. */
SEC("raw_tp/test")
int BPF_PROG(test_note_range_miss, __u64 ip)
{
	note_range_miss(ip);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
