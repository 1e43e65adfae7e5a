// Package procfs reads what leakscope needs to know about a target process
// from /proc: its memory mappings, its command line, whether it is a
// kernel thread, and its credentials, pid namespaces and caught signals.
//
// It parses text; symbolizing the mapped objects is the job of package
// symbolize. OpenFile is how every package opens a file a target controls
// (its objects under /proc/<pid>/root, a JVM's perf map in /tmp): never
// blocking, never following a final symbolic link, regular files of a
// bounded size only. Functions that take a pid read /proc/<pid>/...; the
// parsers behind them take an io.Reader or bytes so they can be tested on
// fixtures and fuzzed.
package procfs
