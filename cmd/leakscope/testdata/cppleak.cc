// cppleak leaks through the C++ library: objects from new, the storage of
// std::vector and std::string kept in a container that is never freed,
// each from its own function, so every row has one culprit.
#include <cstdio>
#include <string>
#include <vector>

struct Conn {
	char buf[200];
};

static std::vector<std::vector<int> *> *vectors;
static std::vector<std::string *> *strings;

__attribute__((noinline)) Conn *open_conn() { return new Conn(); }

__attribute__((noinline)) void grow_table(int n)
{
	auto *v = new std::vector<int>();
	for (int i = 0; i < n; i++)
		v->push_back(i);
	vectors->push_back(v);
}

__attribute__((noinline)) void remember_name(int i)
{
	strings->push_back(new std::string(std::string(100, 'x') + std::to_string(i)));
}

int main()
{
	vectors = new std::vector<std::vector<int> *>();
	strings = new std::vector<std::string *>();
	vectors->reserve(64);
	strings->reserve(64);
	for (int i = 0; i < 20; i++) {
		open_conn();
		grow_table(1000);
		remember_name(i);
	}
	std::printf("cppleak: done\n");
	return 0;
}
