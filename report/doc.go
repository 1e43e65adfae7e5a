// Package report renders ranked captures for people and programs: a text
// report for terminals, a versioned JSON report (see docs/json-report.md), a
// pprof profile for pprof, Pyroscope and Parca, and the text of a diff
// between two captures.
//
// It reads analyze results and never imports probe or cilium/ebpf, so reports
// can be rendered anywhere from a saved capture.
package report
