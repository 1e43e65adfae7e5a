// Package bpftest holds the BPF_PROG_TEST_RUN harnesses of ebpf/test.bpf.c:
// programs that call the BPF helpers the probes are built from, one each,
// on the same maps. Only probe's tests import it, so the harness object is
// never part of the leakscope binary.
package bpftest
