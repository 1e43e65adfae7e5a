/*
 * nolibc.c - leakscope example target with no allocator at all: no libc,
 * no malloc, nothing an allocator probe could attach to. leakscope must
 * refuse it with one clear line ("no allocator found"), never crash.
 *
 * Without arguments it sleeps 30 s (so a test can attach to it); with any
 * argument it exits at once. Exit status 0. Raw system calls only (x86-64).
 *
 * Build:
 *   gcc -static -nostdlib -O2 -o nolibc nolibc.c
 */
#if !defined(__x86_64__)
#error "nolibc.c uses x86-64 system calls"
#endif

struct timespec_raw {
	long tv_sec;
	long tv_nsec;
};

static long sys2(long nr, long a, long b)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b)
			 : "rcx", "r11", "memory");
	return ret;
}

__attribute__((noreturn, used)) void start_c(long *sp)
{
	long argc = sp[0];
	struct timespec_raw ts = { argc > 1 ? 0 : 30, 0 };

	sys2(35 /* nanosleep */, (long)&ts, 0);
	sys2(60 /* exit */, 0, 0);
	for (;;)
		;
}

__asm__(".globl _start\n"
	"_start:\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call start_c\n");
