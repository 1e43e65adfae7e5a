// Package analyze holds leakscope's capture model and ranks the allocation
// sites of a capture by how much they look like a leak, using their size,
// age, free rate and growth across snapshots. It also reads and writes
// capture files, checks ranked leaks against CI rules and compares two
// captures.
//
// It is pure Go: it never imports probe or cilium/ebpf, so a capture written
// on one machine can be analyzed anywhere.
package analyze
