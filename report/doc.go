// Package report renders ranked captures for people and programs: a text
// report for terminals and a versioned JSON report (see docs/json-report.md).
//
// It reads analyze results and never imports probe or cilium/ebpf, so reports
// can be rendered anywhere from a saved capture.
package report
