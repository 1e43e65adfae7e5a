// Package analyze holds leakscope's capture model and ranks the allocation
// sites of a capture by how much they look like a leak.
//
// It is pure Go: it never imports probe or cilium/ebpf, so a capture written
// on one machine can be analyzed anywhere.
package analyze
