/* Every register and ABI fact the programs use, once per target
 * architecture (bpf2go defines __TARGET_ARCH_x86 or __TARGET_ARCH_arm64):
 * a probed function's arguments, return value and stack, frame and
 * instruction pointers, its return address at entry, a syscall's number
 * and arguments from the task's saved registers, the callee-saved
 * registers, and the frame layouts of the stack walker. BPF-only.
 *
 * The x86-64 object is the one leakscope traces with. The arm64 values
 * follow the AAPCS64 and the Linux arm64 syscall ABI; where a part of the
 * design rests on an x86-64 layout that arm64 does not have, the arm64
 * side says so here or at the code that rests on it, and what it needs. */
#ifndef ARCH_BPF_H
#define ARCH_BPF_H

#include "vmlinux.h"
#include "bpf/bpf_tracing.h"

#include "leakscope.h"

/* A probed function's registers, at a uprobe (its entry, or the
 * instruction its probe sits on) or at a return probe (just returned into
 * its caller). */
#define arch_ip(r) PT_REGS_IP(r)
#define arch_sp(r) PT_REGS_SP(r)
#define arch_fp(r) PT_REGS_FP(r)
#define arch_ret(r) PT_REGS_RC(r)
#define arch_arg1(r) PT_REGS_PARM1(r)
#define arch_arg2(r) PT_REGS_PARM2(r)
#define arch_arg3(r) PT_REGS_PARM3(r)
#define arch_arg4(r) PT_REGS_PARM4(r)
#define arch_arg5(r) PT_REGS_PARM5(r)

/* site_reg loads field of regs at its constant offset. An asm load: the
 * compiler would otherwise merge site_arg's loads into one from a computed
 * offset, a modified ctx pointer, which the verifier rejects. */
#define site_reg(regs, field) ({						\
	__u64 __v;								\
	asm volatile("%0 = *(u64 *)(%1 + %2)" : "=r"(__v)			\
		     : "r"(regs), "i"(__builtin_offsetof(struct pt_regs, field)));	\
	__v;									\
})

#if defined(__TARGET_ARCH_x86)

/* site_arg is register reg (enum arg_reg) of regs; 0 for an unknown one. */
static __always_inline __u64 site_arg(struct pt_regs *regs, __u32 reg)
{
	switch (reg) {
	case ARG_REG_DI: return site_reg(regs, di);
	case ARG_REG_SI: return site_reg(regs, si);
	case ARG_REG_DX: return site_reg(regs, dx);
	case ARG_REG_CX: return site_reg(regs, cx);
	case ARG_REG_R8: return site_reg(regs, r8);
	case ARG_REG_R9: return site_reg(regs, r9);
	case ARG_REG_AX: return site_reg(regs, ax);
	case ARG_REG_BX: return site_reg(regs, bx);
	case ARG_REG_BP: return site_reg(regs, bp);
	case ARG_REG_R10: return site_reg(regs, r10);
	case ARG_REG_R11: return site_reg(regs, r11);
	case ARG_REG_R12: return site_reg(regs, r12);
	case ARG_REG_R13: return site_reg(regs, r13);
	case ARG_REG_R14: return site_reg(regs, r14);
	case ARG_REG_R15: return site_reg(regs, r15);
	}
	return 0;
}

/* libbpf 1.1 has no PT_REGS_PARM6. */
#define arch_arg6(r) ((r)->r9)

/* Field names of struct pt_regs, for code that builds registers (the
 * test harness). */
#define ARCH_IP_FIELD ip
#define ARCH_SP_FIELD sp

/* A call pushes the return address: at a function's entry it is in the
 * stack slot at sp, where it stays while the call runs (zcall_active
 * reads it there again), and the return pops it: the caller's stack
 * pointer after the return is the entry's plus ARCH_RET_SP_DELTA. */
#define ARCH_ENTRY_RA_IN_SLOT 1
#define ARCH_RET_SP_DELTA 8

/* arch_entry_ra stores in *ra the return address of a function whose
 * registers regs were taken at its entry (before its prologue moved the
 * stack pointer), sp being arch_sp(regs); nonzero when it could not be
 * read. */
static __always_inline long arch_entry_ra(struct pt_regs *regs, __u64 sp, __u64 *ra)
{
	return bpf_probe_read_user(ra, sizeof(*ra), (void *)sp);
}

/* A task's saved user registers during a syscall or at its exit
 * (bpf_task_pt_regs): its number, and its arguments 1-4 as the syscall
 * ABI passes them (%r10 for the fourth). The return value goes to %rax
 * alone, so every argument register still holds its argument at the
 * exit. */
#define arch_syscall_nr(r) ((r)->orig_ax)
#define arch_syscall_arg1(r) ((r)->di)
#define arch_syscall_arg2(r) ((r)->si)
#define arch_syscall_arg3(r) ((r)->dx)
#define arch_syscall_arg4(r) ((r)->r10)

/* Syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
#define SYS_NR_CLONE 56
#define SYS_NR_VFORK 58
#define SYS_NR_CLONE3 435

/* The callee-saved registers (System V x86-64 ABI) but %rsp:
 * arch_callee_saved(r, i) for a constant i < ARCH_CALLEE_SAVED is %rbp,
 * %rbx, %r12, %r13, %r14, %r15. */
#define ARCH_CALLEE_SAVED 6
#define arch_callee_saved(r, i)						\
	((i) == 0 ? PT_REGS_FP(r) : (i) == 1 ? (r)->bx : (i) == 2 ? (r)->r12 :	\
	 (i) == 3 ? (r)->r13 : (i) == 4 ? (r)->r14 : (r)->r15)

/* arch_set_callee_saved sets callee-saved register i of regs (the test
 * harness). */
static __always_inline void arch_set_callee_saved(struct pt_regs *regs, int i, __u64 v)
{
	switch (i) {
	case 0: regs->bp = v; break;
	case 1: regs->bx = v; break;
	case 2: regs->r12 = v; break;
	case 3: regs->r13 = v; break;
	case 4: regs->r14 = v; break;
	case 5: regs->r15 = v; break;
	}
}

/* The stack walker's frame layouts. A frame-pointer frame is %rbp
 * pointing at the caller's %rbp, with the return address above it; the
 * caller's stack pointer is just above that, at fp + ARCH_FP_CALLER_SP
 * (push %rbp after the call pushed the return address). An .eh_frame
 * row's return address is at CFA - 8 (ARCH_CFA_RA_OFF). */
#define ARCH_FP_CALLER_SP 16
#define ARCH_CFA_RA_OFF (-8)

/* Go's runtime.asmcgocall (src/runtime/asm_amd64.s), called on a
 * goroutine, stores at the C callee's CFA the goroutine's stack depth
 * (g.stack.hi minus the address asmcgocall pushed its caller's %rbp at)
 * in word ARCH_GO_CGO_DEPTH_WORD and g in word ARCH_GO_CGO_G_WORD; called
 * on a system stack (nosave), that address itself, then 0. That address
 * is where a frame-pointer step continues: ARCH_GO_CGO_FP_BELOW below it,
 * none here. */
#define ARCH_GO_CGO_DEPTH_WORD 0
#define ARCH_GO_CGO_G_WORD 1
#define ARCH_GO_CGO_FP_BELOW 0

/* Word offsets of the Method* and bytecode pointer slots below an
 * interpreted frame's %rbp (HotSpot x86-64 frame_x86.hpp:
 * interpreter_frame_method_offset, interpreter_frame_bcp_offset); the
 * last sp and the sender sp follow the Method* upwards. */
#define JVM_INTERP_METHOD_OFFSET (-3 * 8)
#define JVM_INTERP_BCP_OFFSET (-8 * 8)

#elif defined(__TARGET_ARCH_arm64)

/* site_arg is register reg (enum arg_reg: x0-x30 by number) of regs; 0
 * for an unknown one. */
#define SITE_ARG_X(n) case ARG_REG_X##n: return site_reg(regs, regs[n])
static __always_inline __u64 site_arg(struct pt_regs *regs, __u32 reg)
{
	switch (reg) {
	SITE_ARG_X(0); SITE_ARG_X(1); SITE_ARG_X(2); SITE_ARG_X(3);
	SITE_ARG_X(4); SITE_ARG_X(5); SITE_ARG_X(6); SITE_ARG_X(7);
	SITE_ARG_X(8); SITE_ARG_X(9); SITE_ARG_X(10); SITE_ARG_X(11);
	SITE_ARG_X(12); SITE_ARG_X(13); SITE_ARG_X(14); SITE_ARG_X(15);
	SITE_ARG_X(16); SITE_ARG_X(17); SITE_ARG_X(18); SITE_ARG_X(19);
	SITE_ARG_X(20); SITE_ARG_X(21); SITE_ARG_X(22); SITE_ARG_X(23);
	SITE_ARG_X(24); SITE_ARG_X(25); SITE_ARG_X(26); SITE_ARG_X(27);
	SITE_ARG_X(28); SITE_ARG_X(29); SITE_ARG_X(30);
	}
	return 0;
}

/* libbpf 1.1 has no PT_REGS_PARM6. */
#define arch_arg6(r) ((r)->regs[5])

#define ARCH_IP_FIELD pc
#define ARCH_SP_FIELD sp

/* A call (bl, blr) leaves the return address in x30 (lr) and the stack
 * pointer as it was: the caller's stack pointer after the return is the
 * entry's. The callee's prologue saves x30 with x29 as its frame record
 * (stp x29, x30, [sp, #-N]! or at an offset of a frame already made),
 * where only its code or its unwind row says: there is no slot that
 * holds the return address while the call runs at a fixed place from the
 * entry's sp (ARCH_ENTRY_RA_IN_SLOT 0; see zlib_inflate_enter). */
#define ARCH_ENTRY_RA_IN_SLOT 0
#define ARCH_RET_SP_DELTA 0

static __always_inline long arch_entry_ra(struct pt_regs *regs, __u64 sp, __u64 *ra)
{
	*ra = PT_REGS_RET(regs); /* x30 */
	return 0;
}

/* The syscall number is in pt_regs.syscallno, the arguments in x0-x5;
 * at the exit x0 holds the return value, and the first argument is in
 * orig_x0 (saved at the syscall's entry; libbpf's
 * PT_REGS_PARM1_SYSCALL). */
#define arch_syscall_nr(r) ((r)->syscallno)
#define arch_syscall_arg1(r) ((r)->orig_x0)
#define arch_syscall_arg2(r) ((r)->regs[1])
#define arch_syscall_arg3(r) ((r)->regs[2])
#define arch_syscall_arg4(r) ((r)->regs[3])

/* Syscall numbers (include/uapi/asm-generic/unistd.h). arm64 has no
 * vfork: glibc's vfork is clone(CLONE_VM | CLONE_VFORK), which
 * clone_vfork sees by its flag. clone's arguments are (flags, newsp,
 * parent_tid, tls, child_tid) (CONFIG_CLONE_BACKWARDS): flags and the
 * stack are arguments 1 and 2, as on x86-64. */
#define SYS_NR_CLONE 220
#define SYS_NR_CLONE3 435

/* The callee-saved registers (AAPCS64) but sp: x19-x28 and x29, the
 * frame pointer. Which of them a zlib built for arm64 keeps its inflate
 * state in across the window's malloc has not been measured; all are
 * scanned. */
#define ARCH_CALLEE_SAVED 11
#define arch_callee_saved(r, i) ((r)->regs[19 + (i)])

static __always_inline void arch_set_callee_saved(struct pt_regs *regs, int i, __u64 v)
{
	if (i >= 0 && i < ARCH_CALLEE_SAVED)
		regs->regs[19 + i] = v;
}

/* A frame record is {x29, x30} at x29, the same two words as x86-64's
 * {%rbp, return address}: a frame-pointer step reads them alike. But the
 * record may lie anywhere in its frame (gcc puts it at the bottom, clang
 * at the top), so fp + 16 is only a lower bound of the caller's stack
 * pointer, good for the walk's sanity checks and not for what needs the
 * exact one (an .eh_frame row's CFA, a HotSpot compiled frame's size, the
 * words asmcgocall stored at its C callee's CFA): on arm64 a
 * frame-pointer step cannot hand those an exact sp; they need the
 * caller's CFA from an unwind row instead.
 *
 * An .eh_frame row's return address is not at a fixed offset from the
 * CFA: the CIE's return address column is x30, and a row says where x30
 * was saved (CFA + offset), or that it is still in x30 (a leaf, or the
 * first instruction of any function), or that it is signed
 * (DW_CFA_AARCH64_negate_ra_state: strip its PAC bits). struct unwind_row
 * has no field for that rule: dwarf_step stops with
 * STACK_UNWIND_UNSUPPORTED on arm64 until the row carries it. */
#define ARCH_FP_CALLER_SP 16

/* Go's runtime.asmcgocall (src/runtime/asm_arm64.s) stores at the C
 * callee's CFA g in word 0 and the goroutine's stack depth (g.stack.hi
 * minus the stack pointer after its prologue) in word 1; called on a
 * system stack (nosave), 0 then that stack pointer. The prologue the
 * assembler gives it (a frame of 16 bytes: x30 at sp, the caller's x29 at
 * sp - 8, x29 = sp - 8) puts its frame record 8 bytes below that stack
 * pointer. */
#define ARCH_GO_CGO_DEPTH_WORD 1
#define ARCH_GO_CGO_G_WORD 0
#define ARCH_GO_CGO_FP_BELOW 8

/* HotSpot aarch64 (JDK 17's frame_aarch64.hpp) keeps the Method* at fp-3
 * words, with the last sp and the sender sp above it as on x86-64, and
 * the bytecode pointer at fp-9 words: a padding slot lies between the
 * method data and the mirror. A compiled frame's return address may be
 * signed (-XX:+UseROPProtection) and would then need its PAC bits
 * stripped; the walker does not. */
#define JVM_INTERP_METHOD_OFFSET (-3 * 8)
#define JVM_INTERP_BCP_OFFSET (-9 * 8)

#else
#error "leakscope: arch.bpf.h has no definitions for this target architecture"
#endif

#endif /* ARCH_BPF_H */
