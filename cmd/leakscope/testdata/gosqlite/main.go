// Command gosqlite is a leakscope test target on a real cgo library,
// github.com/mattn/go-sqlite3, built with its default cgo flags (the
// SQLite amalgamation without frame pointers). cacheQueries prepares
// statements and keeps them without closing them; runQueries prepares
// the same statement and closes each one.
//
// Ground truth: the SQLite allocations outstanding after cacheQueries,
// minus those before it, counted by SQLite itself
// (sqlite3_status64(SQLITE_STATUS_MALLOC_COUNT)); each SQLite allocation
// is one malloc or realloc of libc. runQueries leaves none. The summary
// line on stderr reports both:
//
//	gosqlite: leaked 200 statements holding 1800 allocations; closed 300 statements leaving 0
package main

/*
// SQLite's own count of its outstanding allocations (sqlite3.c,
// linked into this binary by go-sqlite3).
int sqlite3_status64(int op, long long *current, long long *highwater, int reset);

static long long sqlite_mallocs(void)
{
	long long current = 0, highwater = 0;
	sqlite3_status64(9, &current, &highwater, 0); // SQLITE_STATUS_MALLOC_COUNT
	return current;
}
*/
import "C"

import (
	"database/sql/driver"
	"flag"
	"fmt"
	"os"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

const query = "SELECT id, name FROM items WHERE id > ? ORDER BY name"

// cache keeps the leaked statements reachable: go-sqlite3 closes a
// statement the garbage collector finds unreachable.
var cache []driver.Stmt

// cacheQueries prepares n statements and never closes them.
//
//go:noinline
func cacheQueries(conn driver.Conn, n int) {
	for i := 0; i < n; i++ {
		st, err := conn.Prepare(query)
		if err != nil {
			fail(err)
		}
		cache = append(cache, st)
	}
}

// runQueries prepares n statements and closes each one.
//
//go:noinline
func runQueries(conn driver.Conn, n int) {
	for i := 0; i < n; i++ {
		st, err := conn.Prepare(query)
		if err != nil {
			fail(err)
		}
		if err := st.Close(); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gosqlite:", err)
	os.Exit(1)
}

func main() {
	leak := flag.Int("leak", 200, "statements cacheQueries keeps")
	closed := flag.Int("closed", 300, "statements runQueries closes")
	waitFile := flag.String("wait-file", "", "wait until this file exists before starting")
	hold := flag.Duration("hold", 0, "stay alive this long after the summary")
	rounds := flag.Int("rounds", 10, "rounds of work: each keeps leak/rounds statements and closes closed/rounds")
	pause := flag.Duration("pause", 300*time.Millisecond, "pause after each round")
	flag.Parse()
	if *waitFile != "" {
		for {
			if _, err := os.Stat(*waitFile); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	conn, err := (&sqlite3.SQLiteDriver{}).Open(":memory:")
	if err != nil {
		fail(err)
	}
	// The schema is read once, by the first statement on the table; here,
	// so that neither path below is charged with it.
	ex := conn.(driver.Execer)
	if _, err := ex.Exec("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)", nil); err != nil {
		fail(err)
	}
	if _, err := ex.Exec("INSERT INTO items (name) VALUES ('a'), ('b')", nil); err != nil {
		fail(err)
	}
	st, err := conn.Prepare(query)
	if err != nil {
		fail(err)
	}
	st.Close()

	// As a server does, request after request: each round keeps some
	// statements and closes others, so the kept ones grow with the
	// program's work.
	var leaked, left C.longlong
	for r := 0; r < *rounds; r++ {
		before := C.sqlite_mallocs()
		cacheQueries(conn, *leak / *rounds)
		leaked += C.sqlite_mallocs() - before
		before = C.sqlite_mallocs()
		runQueries(conn, *closed / *rounds)
		left += C.sqlite_mallocs() - before
		time.Sleep(*pause)
	}
	fmt.Fprintf(os.Stderr, "gosqlite: leaked %d statements holding %d allocations; closed %d statements leaving %d\n",
		len(cache), leaked, *closed, left)
	time.Sleep(*hold)
}
