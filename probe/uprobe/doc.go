// Package uprobe attaches leakscope's BPF programs to functions of an ELF
// object: it finds each function's probe site (the first instruction the
// kernel emulates that keeps what the program reads), gives each probe
// its cookie, and makes the links, with one uprobe_multi link per program
// where the kernel has them, one uprobe-session link for the malloc
// family (Attacher.Session), or one perf link per probe. The release
// functions of a family are attached before its acquire functions.
//
// Its caller decides what to probe: which object, which functions with
// which program and cookie (Spec). It takes the programs from
// probe/kernel and knows nothing of the tracer or the process image.
package uprobe
