// Test target for C++ demangling: built by the tests with g++ -g -O0.
#include <cstdlib>

namespace leak {
struct Pool {
	void *grab(unsigned long n); // mangled _ZN4leak4Pool4grabEm
};

__attribute__((noinline)) void *Pool::grab(unsigned long n) { // line:grab
	return std::malloc(n);
}
} // namespace leak

int main(int argc, char **) {
	leak::Pool pool;
	std::free(pool.grab(static_cast<unsigned long>(argc)));
	return 0;
}
