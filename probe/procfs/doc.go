// Package procfs reads what leakscope needs to know about a target process
// from /proc: its memory mappings, its command line, whether it is a
// kernel thread, and its credentials, pid namespaces and caught signals.
//
// It only parses text; opening and symbolizing the mapped objects is the job
// of package symbolize. Functions that take a pid read /proc/<pid>/...; the
// parsers behind them take an io.Reader or bytes so they can be tested on
// fixtures and fuzzed.
package procfs
