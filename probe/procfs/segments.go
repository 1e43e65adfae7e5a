package procfs

import (
	"debug/elf"
	"fmt"
)

// LoadSegments returns the loadable segments (PT_LOAD program headers) of
// the ELF object at path, opened as an object a target controls
// (OpenFile, ObjectLimits).
func LoadSegments(path string) ([]elf.ProgHeader, error) {
	r, err := OpenFile(nil, path, ObjectLimits)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("parse elf %s: %w", path, err)
	}
	var segs []elf.ProgHeader
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			segs = append(segs, p.ProgHeader)
		}
	}
	return segs, nil
}
