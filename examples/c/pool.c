/*
 * pool.c - a tiny connection-pool library for leakscope's user-declared
 * pair example (built as libpool.so). A connection is acquired with
 * pool_get() (handle returned) or pool_open(&conn) (handle stored through
 * the argument, 0 on success) and released with pool_put(conn).
 */
#include <stdlib.h>
#include <string.h>

struct pool_conn {
	int id;
	char buf[200];
};

static int next_id;

struct pool_conn *pool_get(void)
{
	struct pool_conn *c = malloc(sizeof(*c));
	if (!c)
		return NULL;
	memset(c, 0, sizeof(*c));
	c->id = ++next_id;
	return c;
}

int pool_open(struct pool_conn **out)
{
	*out = pool_get();
	return *out ? 0 : -1;
}

void pool_put(struct pool_conn *c)
{
	free(c);
}
