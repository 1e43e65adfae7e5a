// Package jvm names the Java code on a HotSpot JVM's native call stacks.
//
// A JVM's compiled Java methods live in anonymous executable memory (the
// code cache), which no ELF object describes. HotSpot writes a perf map
// (/tmp/perf-<pid>.map: one "START SIZE NAME" line per piece of code) when
// asked by the diagnostic command Compiler.perfmap. This package finds a
// HotSpot JVM among a process's mappings, runs diagnostic commands in it
// through HotSpot's dynamic-attach protocol (what jcmd does, without jcmd),
// parses the perf map and names return addresses from it, refreshing the
// map when code it does not know yet shows up.
//
// Frames are only as good as the frame-pointer chain that found them:
// compiled Java code keeps %rbp as a frame pointer only with
// -XX:+PreserveFramePointer. A Namer says, frame by frame, whether the
// next frame of a walk can be trusted.
package jvm
