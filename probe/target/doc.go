// Package target is what leakscope knows of one traced process image:
// its executable mappings and the ELF objects behind them (Image, the
// stack resolver's stacks.Mappings), their frame-pointer classes, its
// runtime (native or Go; a JVM's code cache once the tracer found it),
// the range table the kernel walks it with (Image.Ranges), and its
// allocator, found among its mappings or predicted before a launched
// program runs (FindAllocator, AllocatorForExec); with the mapping kinds,
// the mappings and threads it made while traced, from the kernel's
// records (Mappings). The tracer keeps one Image per traced process and
// starts it again when the process execs.
// It neither loads nor attaches anything.
package target
