package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// ntGNUBuildID is NT_GNU_BUILD_ID from elf.h.
const ntGNUBuildID = 3

// maxNoteBytes bounds how much of a PT_NOTE segment is read: real note
// segments are a few hundred bytes, and a corrupt size must not make us
// allocate gigabytes.
const maxNoteBytes = 1 << 20

// buildID returns the GNU build ID in lowercase hex, or "" when the object
// has none. It looks at SHT_NOTE sections first and falls back to PT_NOTE
// segments, which survive section-header stripping.
func buildID(f *elf.File) (string, error) {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return "", fmt.Errorf("read build id: section %s: %w", s.Name, err)
		}
		if id := findBuildID(data, s.Addralign, f.ByteOrder); id != "" {
			return id, nil
		}
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(p.Open(), maxNoteBytes))
		if err != nil {
			return "", fmt.Errorf("read build id: note segment at offset %#x: %w", p.Off, err)
		}
		if id := findBuildID(data, p.Align, f.ByteOrder); id != "" {
			return id, nil
		}
	}
	return "", nil
}

// findBuildID walks the notes in data. Name and descriptor are padded to
// align, which is 4 except for notes in 8-aligned sections.
func findBuildID(data []byte, align uint64, order binary.ByteOrder) string {
	if align != 8 {
		align = 4
	}
	pad := func(n uint64) uint64 { return (n + align - 1) &^ (align - 1) }
	for len(data) >= 12 {
		namesz := uint64(order.Uint32(data[0:]))
		descsz := uint64(order.Uint32(data[4:]))
		typ := order.Uint32(data[8:])
		rest := uint64(len(data) - 12)
		if pad(namesz) > rest || descsz > rest-pad(namesz) {
			return ""
		}
		name := data[12 : 12+namesz]
		desc := data[12+pad(namesz) : 12+pad(namesz)+descsz]
		if typ == ntGNUBuildID && bytes.Equal(name, []byte("GNU\x00")) && len(desc) > 0 {
			return hex.EncodeToString(desc)
		}
		next := 12 + pad(namesz) + pad(descsz)
		if next > uint64(len(data)) {
			return ""
		}
		data = data[next:]
	}
	return ""
}

// debuglink is the content of a .gnu_debuglink section: the base name of
// the separate debug file and the CRC-32 of its whole content.
type debuglink struct {
	name string
	crc  uint32
}

// readDebuglink returns the object's .gnu_debuglink, or a zero debuglink
// when it has none.
func readDebuglink(f *elf.File) (debuglink, error) {
	s := f.Section(".gnu_debuglink")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return debuglink{}, nil
	}
	data, err := s.Data()
	if err != nil {
		return debuglink{}, fmt.Errorf("read .gnu_debuglink: %w", err)
	}
	name, _, ok := bytes.Cut(data, []byte{0})
	// The CRC follows the name's NUL, at the next multiple of 4.
	crcOff := (len(name) + 1 + 3) &^ 3
	if !ok || len(name) == 0 || crcOff+4 > len(data) {
		return debuglink{}, errors.New("read .gnu_debuglink: truncated")
	}
	if bytes.ContainsRune(name, '/') {
		return debuglink{}, fmt.Errorf("read .gnu_debuglink: name %q is not a base name", name)
	}
	return debuglink{name: string(name), crc: f.ByteOrder.Uint32(data[crcOff:])}, nil
}
