// Package unwind turns the DWARF call frame information of an ELF object
// (.eh_frame, or .debug_frame when that is all there is) into a flat
// table that a BPF program can binary-search by PC to step from a frame
// to its caller without frame pointers.
//
// Build makes Rows, the kernel walker's format, of an x86-64 object: only
// what the walk needs survives, the CFA rule (rsp or rbp plus an offset,
// the .plt expression, or a stop), where the caller's rbp was saved, and
// the x86-64 convention that the return address sits at CFA-8.
// BuildRules makes Rules of an x86-64 or AArch64 object, which say the
// same for either architecture: the CFA from sp or the frame pointer (rbp,
// x29), the return address at an offset from the CFA or still in the link
// register (x30) and whether it is signed (pointer authentication), and
// the caller's frame pointer. Code a table cannot describe gets a stop
// rule (RuleUnsupported, CFAUnsupported) and code no FDE covers
// RuleUndefined (CFAUndefined), so the walker stops rather than reading
// garbage.
//
// Addresses are ELF virtual addresses of the object (as in `readelf`), not
// runtime addresses: the walker subtracts the mapping's load bias first.
// Build and BuildRules never panic on malformed input; structural damage
// is an error, while a CFA program they cannot follow only makes the
// affected rows stop rows, counted by reason in Stats.
package unwind
