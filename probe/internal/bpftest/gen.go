package bpftest

//go:generate go tool bpf2go -tags linux -target amd64,arm64 Harness ../../../ebpf/test.bpf.c -- -I../../../ebpf -I../../../ebpf/include
