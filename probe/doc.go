// Package probe traces a live process with eBPF uprobes: it finds the
// target's allocator, loads and attaches the programs built from ebpf/,
// keeps the kernel's view of the target's executable mappings current, reads
// the per-site aggregates at an interval and symbolizes every stack while the
// target is still alive. The BPF object is probe/kernel's, which alone
// sees the generated types; stacks are resolved by probe/stacks, over the
// mappings this package keeps. It converts everything to analyze types at
// its boundary; nothing outside probe sees a BPF map.
package probe
