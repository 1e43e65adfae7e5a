package procfs

import (
	"debug/elf"
	"fmt"
	"os"
)

// ELFFile is an ELF object opened by OpenELF; Close closes its file.
type ELFFile struct {
	*elf.File
	r *os.File
}

// Close closes the object's file.
func (f *ELFFile) Close() error { return f.r.Close() }

// OpenELF opens and parses the ELF object at path, an object a target
// controls (OpenFile, ObjectLimits).
func OpenELF(path string) (*ELFFile, error) {
	r, err := OpenFile(nil, path, ObjectLimits)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(r)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("parse elf %s: %w", path, err)
	}
	return &ELFFile{File: f, r: r}, nil
}

// LoadSegments returns the loadable segments (PT_LOAD program headers) of
// the ELF object at path (OpenELF).
func LoadSegments(path string) ([]elf.ProgHeader, error) {
	f, err := OpenELF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var segs []elf.ProgHeader
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			segs = append(segs, p.ProgHeader)
		}
	}
	return segs, nil
}
