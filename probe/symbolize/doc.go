// Package symbolize turns addresses in a target's ELF objects into function,
// source file and line, and answers the questions the stack walker asks
// about those objects: which one exports malloc, whether it keeps frame
// pointers, and whether a value on the stack is a plausible return address.
//
// Addresses handed to an Object are ELF virtual addresses (the addresses the
// linker assigned, as in `nm` and `objdump`), not runtime addresses; VAddr
// converts a runtime address using the object's mapping from package
// procfs. Objects are parsed once per build ID through a Cache, so the same
// libc reached through several paths (or several containers) is read once.
//
// Symbols come from .symtab and .dynsym, completed from a separate debug file
// found by build ID or .gnu_debuglink, or else fetched by build ID from
// debuginfod servers in the background (Cache.UseDebuginfod, Debuginfod);
// file and line come from DWARF line tables when present. C++ and Rust names are demangled. Go code is named
// from the binary's own .gopclntab, stripped or not, with the functions the
// compiler inlined at each address (Frames).
package symbolize
