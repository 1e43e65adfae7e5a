/* Ten non-leaf functions, built by the tests with gcc -O2 with and without
 * -fno-omit-frame-pointer to calibrate FramePointerShare. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F(name, next)                                          \
	__attribute__((noinline)) int name(int n) {                \
		char buf[64];                                          \
		snprintf(buf, sizeof buf, "%s %d", #name, n);          \
		return next(n + (int)strlen(buf)) + (int)buf[n % 8];   \
	}

__attribute__((noinline)) int f0(int n) { return (int)(long)malloc((size_t)n) & 1; }
F(f1, f0)
F(f2, f1)
F(f3, f2)
F(f4, f3)
F(f5, f4)
F(f6, f5)
F(f7, f6)
F(f8, f7)
F(f9, f8)

int main(int argc, char **argv) {
	(void)argv;
	printf("%d\n", f9(argc));
	return 0;
}
