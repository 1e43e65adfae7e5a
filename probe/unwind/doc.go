// Package unwind turns the DWARF call frame information of an x86-64 ELF
// object (.eh_frame, or .debug_frame when that is all there is) into a flat
// table of Rows that a BPF program can binary-search by PC to step from a
// frame to its caller without frame pointers.
//
// Only what the stack walk needs survives: the CFA rule (rsp or rbp plus an
// offset, the .plt expression, or a stop), where the caller's rbp was saved,
// and the x86-64 convention that the return address sits at CFA-8. Code the
// table cannot describe gets RuleUnsupported and code no FDE covers gets
// RuleUndefined, so the walker stops rather than reading garbage.
//
// Addresses are ELF virtual addresses of the object (as in `readelf`), not
// runtime addresses: the walker subtracts the mapping's load bias first.
// Build never panics on malformed input; structural damage is an error,
// while a CFA program it cannot follow only makes the affected rows
// RuleUnsupported, counted by reason in Stats.
package unwind
