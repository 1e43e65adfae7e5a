//go:build linux && amd64

package uprobe

import (
	"debug/elf"
	"fmt"

	"github.com/leakscope/leakscope/probe/procfs"
)

// FileOffset converts an ELF virtual address to the file offset uprobes take.
func FileOffset(path string, vaddr uint64) (uint64, error) {
	segs, err := procfs.LoadSegments(path)
	if err != nil {
		return 0, err
	}
	for _, p := range segs {
		if p.Flags&elf.PF_X != 0 && vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("%s: address 0x%x is in no executable segment", path, vaddr)
}
