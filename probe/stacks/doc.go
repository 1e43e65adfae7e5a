// Package stacks turns the stacks the kernel walked into validated,
// symbolized analyze stacks: raw return addresses in, frames and the
// reason a walk stopped out. It knows the target only through Mappings
// (which mapping holds an address, the ELF object behind it, how the
// kernel walked it) and a runtime's code only through a Namer, so it is
// tested without BPF or a traced process. It neither reads BPF maps nor
// decodes the kernel's stack layout: the kernel layer hands it Raw stacks.
package stacks
