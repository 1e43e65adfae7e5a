/* Test target for package symbolize: built by the tests with gcc -g -O0
 * -fno-omit-frame-pointer. Comments of the form "line:NAME" mark lines the
 * tests expect symbolization to report. It prints the runtime addresses
 * of middle and malloc, then waits for stdin to close. */
#include <stdio.h>
#include <stdlib.h>

void *(*allocator)(size_t) = malloc;

__attribute__((noinline)) void *leaf_alloc(size_t n) { /* line:leaf_alloc */
	return allocator(n); /* line:indirect-call */
}

__attribute__((noinline)) void *middle(size_t n) { /* line:middle */
	void *p = leaf_alloc(n + 1); /* line:direct-call */
	return p;
}

int main(int argc, char **argv) {
	(void)argv;
	void *p = middle((size_t)argc);
	printf("%p %p\n", (void *)middle, (void *)malloc);
	fflush(stdout);
	while (getchar() != EOF) {
	}
	free(p);
	return 0;
}
