/* Seed for FuzzObject, committed as tiny.elf:
 * gcc -g -Os -nostdlib -static -fno-asynchronous-unwind-tables -Wl,--build-id -o tiny.elf tiny.c */
static int helper(int x) { return x * 3 + 1; }

int twice(int x) { return helper(x) + helper(x + 1); }

void _start(void) {
	volatile int v = twice(7);
	(void)v;
	for (;;) {
	}
}
