package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errTruncated reports a read past the end of an entry or a section.
var errTruncated = errors.New("truncated")

// reader decodes DWARF primitives from b with a sticky error: after the
// first failure every read returns zero, so callers check err once.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) left() int { return len(r.b) - r.pos }

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > r.left() {
		r.fail(errTruncated)
		return nil
	}
	v := r.b[r.pos : r.pos+n]
	r.pos += n
	return v
}

func (r *reader) u8() uint8 {
	if r.err != nil || r.left() < 1 {
		r.fail(errTruncated)
		return 0
	}
	v := r.b[r.pos]
	r.pos++
	return v
}

func (r *reader) u16() uint16 {
	b := r.bytes(2)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(b)
}

func (r *reader) u32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *reader) u64() uint64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// uleb reads an unsigned LEB128 number; bits beyond 64 are dropped.
func (r *reader) uleb() uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb reads a signed LEB128 number; bits beyond 64 are dropped.
func (r *reader) sleb() int64 {
	var v int64
	var shift uint
	for {
		c := r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
}

// cstring reads a NUL-terminated string.
func (r *reader) cstring() string {
	if r.err != nil {
		return ""
	}
	for i := r.pos; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := string(r.b[r.pos:i])
			r.pos = i + 1
			return s
		}
	}
	r.fail(errTruncated)
	return ""
}

// Pointer encodings (DW_EH_PE_*) from the LSB's description of .eh_frame.
const (
	peAbsptr  = 0x00
	peUleb128 = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSleb128 = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c

	pePcrel    = 0x10
	peTextrel  = 0x20
	peDatarel  = 0x30
	peFuncrel  = 0x40
	peAligned  = 0x50
	peIndirect = 0x80
	peOmit     = 0xff
)

// pointer reads a value encoded with enc. base is the section's vaddr, used
// for pcrel; fn is the FDE's start, used for funcrel (DW_CFA_set_loc).
// Indirect values are returned unresolved: only the personality routine
// uses them, and it is skipped.
func (r *reader) pointer(enc uint8, base, fn uint64) (uint64, error) {
	if enc == peOmit {
		return 0, errors.New("pointer encoding omit where a value is required")
	}
	at := base + uint64(r.pos)
	var v uint64
	switch enc & 0x70 {
	case peAbsptr, pePcrel, peFuncrel:
	case peAligned:
		if pad := int((8 - at%8) % 8); pad > 0 {
			r.bytes(pad)
		}
		v = r.u64()
		if r.err != nil {
			return 0, r.err
		}
		return v, nil
	default:
		return 0, fmt.Errorf("pointer encoding %#x: unsupported application", enc)
	}
	switch enc & 0x0f {
	case peAbsptr, peUdata8, peSdata8:
		v = r.u64()
	case peUleb128:
		v = r.uleb()
	case peUdata2:
		v = uint64(r.u16())
	case peUdata4:
		v = uint64(r.u32())
	case peSleb128:
		v = uint64(r.sleb())
	case peSdata2:
		v = uint64(int64(int16(r.u16())))
	case peSdata4:
		v = uint64(int64(int32(r.u32())))
	default:
		return 0, fmt.Errorf("pointer encoding %#x: unsupported format", enc)
	}
	if r.err != nil {
		return 0, r.err
	}
	switch enc & 0x70 {
	case pePcrel:
		v += at
	case peFuncrel:
		v += fn
	}
	return v, nil
}

// cie is a parsed Common Information Entry.
type cie struct {
	off       int // offset in the section, for messages
	codeAlign uint64
	dataAlign int64
	raReg     uint64
	fdeEnc    uint8 // encoding of FDE addresses; absptr unless 'R'
	addrSize  int   // .debug_frame v4 address_size; 8 otherwise
	hasAug    bool  // 'z': FDEs carry augmentation data with a length
	signal    bool  // 'S': signal trampoline frames
	initial   []byte

	// Computed from initial on first use by prepare.
	prepared bool
	init     state   // the rules every FDE starts from, and DW_CFA_restore returns to
	stack    []state // remember_state entries the initial program left behind
	reason   string  // when set, every row of every FDE is RuleUnsupported for this reason
}

// fde is a parsed Frame Description Entry.
type fde struct {
	off        int // offset in the section, for messages
	start, end uint64
	cie        *cie
	prog       []byte
	progOff    int // offset of prog in the section, for pcrel DW_CFA_set_loc
}

// frames holds the entries of one call frame section.
type frames struct {
	cies int
	fdes []fde
}

// parseFrames splits a .eh_frame (debug false) or .debug_frame (debug true)
// section at vaddr addr into CIEs and FDEs. Zero-length entries are skipped,
// as readelf does, rather than taken as the end: linkers leave them between
// input sections' tables.
func parseFrames(data []byte, addr uint64, debug bool) (frames, error) {
	name := "eh_frame"
	if debug {
		name = "debug_frame"
	}
	var fr frames
	cies := map[int]*cie{}
	for pos := 0; pos < len(data); {
		start := pos
		r := reader{b: data, pos: pos}
		length := uint64(r.u32())
		if r.err != nil {
			if allZero(data[start:]) {
				break // alignment padding after the last entry
			}
			return frames{}, fmt.Errorf("%s: entry at %#x: length: %w", name, start, r.err)
		}
		if length == 0 {
			pos = r.pos
			continue
		}
		is64 := length == 0xffffffff
		if is64 {
			length = r.u64()
			if r.err != nil {
				return frames{}, fmt.Errorf("%s: entry at %#x: length: %w", name, start, r.err)
			}
		}
		if length > uint64(r.left()) {
			return frames{}, fmt.Errorf("%s: entry at %#x: length %#x runs past the section end %#x", name, start, length, len(data))
		}
		end := r.pos + int(length)
		pos = end
		body := reader{b: data[:end], pos: r.pos}
		idPos := body.pos
		var id uint64
		var isCIE bool
		switch {
		case debug && is64:
			id = body.u64()
			isCIE = id == ^uint64(0)
		case debug:
			id = uint64(body.u32())
			isCIE = id == 0xffffffff
		default:
			id = uint64(body.u32())
			isCIE = id == 0
		}
		if body.err != nil {
			return frames{}, fmt.Errorf("%s: entry at %#x: CIE id: %w", name, start, body.err)
		}
		if isCIE {
			if _, ok := cies[start]; !ok {
				c, err := parseCIE(data[:end], body.pos, start, debug, addr)
				if err != nil {
					return frames{}, fmt.Errorf("%s: CIE at %#x: %w", name, start, err)
				}
				cies[start] = c
			}
			continue
		}
		cieOff := id
		if !debug {
			cieOff = uint64(idPos) - id // relative to the CIE pointer itself
			if id > uint64(idPos) {
				return frames{}, fmt.Errorf("%s: FDE at %#x: CIE pointer %#x points before the section", name, start, id)
			}
		}
		c, err := cieAt(data, cieOff, debug, addr, cies)
		if err != nil {
			return frames{}, fmt.Errorf("%s: FDE at %#x: %w", name, start, err)
		}
		f, err := parseFDE(&body, c, addr)
		if err != nil {
			return frames{}, fmt.Errorf("%s: FDE at %#x: %w", name, start, err)
		}
		f.off = start
		fr.fdes = append(fr.fdes, f)
	}
	fr.cies = len(cies)
	return fr, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// cieAt returns the CIE at section offset off, parsing it on first use:
// .debug_frame FDEs may point forward.
func cieAt(data []byte, off uint64, debug bool, addr uint64, cies map[int]*cie) (*cie, error) {
	if off >= uint64(len(data)) {
		return nil, fmt.Errorf("CIE pointer %#x is outside the section", off)
	}
	if c, ok := cies[int(off)]; ok {
		return c, nil
	}
	r := reader{b: data, pos: int(off)}
	length := uint64(r.u32())
	is64 := length == 0xffffffff
	if is64 {
		length = r.u64()
	}
	if r.err != nil || length == 0 || length > uint64(r.left()) {
		return nil, fmt.Errorf("CIE at %#x: bad length", off)
	}
	end := r.pos + int(length)
	body := reader{b: data[:end], pos: r.pos}
	var isCIE bool
	switch {
	case debug && is64:
		isCIE = body.u64() == ^uint64(0)
	case debug:
		isCIE = body.u32() == 0xffffffff
	default:
		isCIE = body.u32() == 0
	}
	if body.err != nil || !isCIE {
		return nil, fmt.Errorf("CIE pointer %#x does not point to a CIE", off)
	}
	c, err := parseCIE(data[:end], body.pos, int(off), debug, addr)
	if err != nil {
		return nil, fmt.Errorf("CIE at %#x: %w", off, err)
	}
	cies[int(off)] = c
	return c, nil
}

// parseCIE parses the CIE whose fields (after the CIE id) start at pos and
// which ends at len(data).
func parseCIE(data []byte, pos, off int, debug bool, addr uint64) (*cie, error) {
	r := reader{b: data, pos: pos}
	c := &cie{off: off, addrSize: 8, fdeEnc: peAbsptr}
	version := r.u8()
	switch {
	case r.err != nil:
		return nil, r.err
	case version == 1 || version == 3:
	case version == 4 && debug:
	default:
		return nil, fmt.Errorf("version %d: unsupported", version)
	}
	aug := r.cstring()
	if version == 4 {
		c.addrSize = int(r.u8())
		if seg := r.u8(); seg != 0 {
			return nil, fmt.Errorf("segment selector size %d: unsupported", seg)
		}
		if c.addrSize != 4 && c.addrSize != 8 {
			return nil, fmt.Errorf("address size %d: unsupported", c.addrSize)
		}
	}
	c.codeAlign = r.uleb()
	c.dataAlign = r.sleb()
	if version == 1 {
		c.raReg = uint64(r.u8())
	} else {
		c.raReg = r.uleb()
	}
	if r.err != nil {
		return nil, r.err
	}
	if aug != "" {
		if aug[0] != 'z' {
			return nil, fmt.Errorf("augmentation %q: unsupported", aug)
		}
		c.hasAug = true
		n := r.uleb()
		if r.err != nil {
			return nil, r.err
		}
		if n > uint64(r.left()) {
			return nil, fmt.Errorf("augmentation data length %d runs past the entry", n)
		}
		augEnd := r.pos + int(n)
		ar := reader{b: data[:augEnd], pos: r.pos}
		sawR := false
	letters:
		for _, ch := range aug[1:] {
			switch ch {
			case 'R':
				c.fdeEnc = ar.u8()
				sawR = true
			case 'L':
				ar.u8() // the LSDA encoding; FDEs' 'z' length lets us skip the LSDA
			case 'P':
				enc := ar.u8()
				if ar.err != nil {
					break letters
				}
				if enc&0x70 != peAligned {
					enc &= 0x0f // only the size matters: the value is skipped
				}
				if _, err := ar.pointer(enc, addr, 0); err != nil {
					return nil, fmt.Errorf("personality: %w", err)
				}
			case 'S':
				c.signal = true
			case 'B':
				// AArch64: return addresses are signed with the B key
				// (no data); stripping a PAC needs no key.
			default:
				// Augmentation data has a length, so an unknown letter is
				// harmless once the FDE encoding is known.
				if !sawR {
					return nil, fmt.Errorf("augmentation %q: unknown %q before 'R'", aug, ch)
				}
				break letters
			}
		}
		if ar.err != nil {
			return nil, fmt.Errorf("augmentation data: %w", ar.err)
		}
		r.pos = augEnd
	}
	c.initial = data[r.pos:]
	return c, nil
}

// parseFDE parses an FDE's fields after its CIE pointer.
func parseFDE(r *reader, c *cie, addr uint64) (fde, error) {
	f := fde{cie: c}
	if c.fdeEnc&peIndirect != 0 {
		return fde{}, fmt.Errorf("pointer encoding %#x: indirect initial location", c.fdeEnc)
	}
	var start, size uint64
	if c.addrSize == 4 && c.fdeEnc == peAbsptr {
		start, size = uint64(r.u32()), uint64(r.u32())
	} else {
		var err error
		if start, err = r.pointer(c.fdeEnc, addr, 0); err != nil {
			return fde{}, fmt.Errorf("initial location: %w", err)
		}
		// The range has the format of the encoding but no application.
		if size, err = r.pointer(c.fdeEnc&0x0f, addr, 0); err != nil {
			return fde{}, fmt.Errorf("address range: %w", err)
		}
	}
	if r.err != nil {
		return fde{}, r.err
	}
	if c.hasAug {
		n := r.uleb()
		r.bytes(int(min(n, uint64(r.left())+1)))
		if r.err != nil {
			return fde{}, fmt.Errorf("augmentation data: %w", r.err)
		}
	}
	f.start = start
	f.end = start + size
	if f.end < f.start {
		return fde{}, fmt.Errorf("range %#x+%#x wraps around", start, size)
	}
	f.prog = r.b[r.pos:]
	f.progOff = r.pos
	return f, nil
}
