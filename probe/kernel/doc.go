// Package kernel is leakscope's one user of the BPF object built from
// ebpf/ and of the types bpf2go generates from ebpf/leakscope.h: it loads
// the collection with its constants and map sizes set (Load), hands out
// its programs for attaching (Objects.Program), and reads and writes its
// maps and globals through methods that speak Go types of its own (sites,
// live allocations, stacks, range tables, unwind rows, JVM code heaps,
// records of the ring buffers). Every constant it exports is taken from
// the generated enums, never written again. It knows nothing of the
// traced process beyond a pid, nor of stacks' symbols.
package kernel
