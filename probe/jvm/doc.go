// Package jvm names the Java code on a HotSpot JVM's native call stacks.
//
// A JVM's Java methods run from anonymous executable memory (the code
// cache) that no ELF object describes. HotSpot describes its own types in
// its exported VMStructs tables (gHotSpotVMStructs and friends), read here
// through /proc/<pid>/mem: they give the code cache's heaps and each code
// blob's frame size (so the kernel can walk compiled Java frames without
// frame pointers), and the layout of Method, ConstMethod, ConstantPool and
// the nmethod's scope data, so that an interpreted frame's Method* and a
// compiled frame's PC are named package.Class.method with their source
// lines and the methods the JIT inlined. Fields that HotSpot renamed or
// dropped between releases are read through aliases and fallbacks; what a
// JVM's tables lack is a Gap, said in the report.
//
// When the tables cannot be used, the JVM's perf map (/tmp/perf-<pid>.map,
// one "START SIZE NAME" line per piece of code), written on request through
// HotSpot's dynamic-attach protocol (what jcmd does, without jcmd), names
// compiled code instead, and the walk trusts %rbp only with
// -XX:+PreserveFramePointer: a Namer says, frame by frame, whether the next
// frame of a walk can be trusted.
package jvm
