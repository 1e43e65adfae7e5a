package jvm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/leakscope/leakscope/probe/procfs"
)

// HotSpot describes its own types to serviceability tools in tables it
// exports from libjvm.so: gHotSpotVMStructs lists fields (type, name,
// offset or, for static fields, address) and gHotSpotVMTypes lists type
// sizes; the layout of each table entry is itself given by exported
// gHotSpotVMStructEntry*Offset variables, filled in when the JVM starts.
// leakscope reads them from the target's memory to name interpreted frames
// (Method* → holder class and method name) without any JVM flag.

// Limits on what a target's tables may hold; anything larger is corrupt.
const (
	maxVMEntries = 1 << 14
	maxVMString  = 512
	maxSymbolLen = 1 << 16
)

// Memory reads a process's memory.
type Memory interface {
	io.ReaderAt
}

// VMField is one field of a HotSpot type.
type VMField struct {
	Offset  uint64 // of a non-static field within its object
	Address uint64 // of a static field
	Static  bool
	Type    string // its C++ type ("int", "uint16_t", "address"), "" if not given
}

// VMStructs holds the fields and type sizes one JVM describes.
type VMStructs struct {
	Fields    map[string]VMField // "Type::_field"
	Sizes     map[string]uint64  // type name → size in bytes
	Constants map[string]int32   // "ConstMethod::_has_linenumber_table" → value
}

// vmSymbols are the exported variables leakscope reads, relative to libjvm's
// load bias.
var vmSymbols = []string{
	"gHotSpotVMStructs",
	"gHotSpotVMStructEntryArrayStride",
	"gHotSpotVMStructEntryTypeNameOffset",
	"gHotSpotVMStructEntryFieldNameOffset",
	"gHotSpotVMStructEntryIsStaticOffset",
	"gHotSpotVMStructEntryOffsetOffset",
	"gHotSpotVMStructEntryAddressOffset",
	"gHotSpotVMTypes",
	"gHotSpotVMTypeEntryArrayStride",
	"gHotSpotVMTypeEntryTypeNameOffset",
	"gHotSpotVMTypeEntrySizeOffset",
	"gHotSpotVMIntConstants",
	"gHotSpotVMIntConstantEntryArrayStride",
	"gHotSpotVMIntConstantEntryNameOffset",
	"gHotSpotVMIntConstantEntryValueOffset",
}

// typeStringSymbol gives where a field's type name is in a gHotSpotVMStructs
// entry; optional: without it, fields have the widths leakscope assumes.
const typeStringSymbol = "gHotSpotVMStructEntryTypeStringOffset"

// VMSymbols returns the addresses (file virtual addresses) of the variables
// ReadVMStructs needs, from libjvm.so at path.
func VMSymbols(path string) (map[string]uint64, error) {
	f, err := procfs.OpenELF(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]uint64{}
	for _, s := range syms {
		out[s.Name] = s.Value
	}
	for _, name := range vmSymbols {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("%s does not export %s", path, name)
		}
	}
	return out, nil
}

// ReadVMStructs reads the tables of a running JVM: syms are the exported
// variables' file addresses (VMSymbols), bias libjvm's load bias.
func ReadVMStructs(mem Memory, syms map[string]uint64, bias uint64) (*VMStructs, error) {
	r := reader{mem}
	get := func(name string) (uint64, error) {
		a, ok := syms[name]
		if !ok {
			return 0, fmt.Errorf("libjvm.so does not export %s", name)
		}
		return r.u64(bias + a)
	}
	var v [15]uint64
	for i, name := range vmSymbols {
		x, err := get(name)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		v[i] = x
	}
	structs, sStride, sType, sField, sStatic, sOff, sAddr := v[0], v[1], v[2], v[3], v[4], v[5], v[6]
	types, tStride, tType, tSize := v[7], v[8], v[9], v[10]
	consts, cStride, cName, cValue := v[11], v[12], v[13], v[14]
	sTypeString, haveTypeString := uint64(0), false
	if _, ok := syms[typeStringSymbol]; ok {
		if x, err := get(typeStringSymbol); err == nil && x < sStride {
			sTypeString, haveTypeString = x, true
		}
	}
	if sStride == 0 || tStride == 0 || structs == 0 || types == 0 {
		return nil, errors.New("the JVM has not filled in its VMStructs tables yet (still starting?)")
	}
	if sStride > 1024 || tStride > 1024 || cStride > 1024 {
		return nil, fmt.Errorf("implausible VMStructs entry sizes %d and %d", sStride, tStride)
	}
	vs := &VMStructs{Fields: map[string]VMField{}, Sizes: map[string]uint64{}, Constants: map[string]int32{}}
	for i := uint64(0); ; i++ {
		if i == maxVMEntries {
			return nil, errors.New("gHotSpotVMStructs has no end")
		}
		e := structs + i*sStride
		typ, err := r.stringAt(e + sType)
		if err != nil {
			return nil, fmt.Errorf("gHotSpotVMStructs entry %d: %w", i, err)
		}
		if typ == "" {
			break
		}
		field, err := r.stringAt(e + sField)
		if err != nil {
			return nil, fmt.Errorf("gHotSpotVMStructs entry %d: %w", i, err)
		}
		static, err := r.u32(e + sStatic)
		if err != nil {
			return nil, err
		}
		f := VMField{Static: static != 0}
		if haveTypeString {
			// A type name is a refinement: a field without one is
			// read at the width leakscope assumes.
			f.Type, _ = r.stringAt(e + sTypeString)
		}
		if f.Static {
			f.Address, err = r.u64(e + sAddr)
		} else {
			f.Offset, err = r.u64(e + sOff)
		}
		if err != nil {
			return nil, err
		}
		vs.Fields[typ+"::"+field] = f
	}
	for i := uint64(0); ; i++ {
		if i == maxVMEntries {
			return nil, errors.New("gHotSpotVMTypes has no end")
		}
		e := types + i*tStride
		typ, err := r.stringAt(e + tType)
		if err != nil {
			return nil, fmt.Errorf("gHotSpotVMTypes entry %d: %w", i, err)
		}
		if typ == "" {
			break
		}
		size, err := r.u64(e + tSize)
		if err != nil {
			return nil, err
		}
		vs.Sizes[typ] = size
	}
	for i := uint64(0); consts != 0 && cStride != 0; i++ {
		if i == maxVMEntries {
			return nil, errors.New("gHotSpotVMIntConstants has no end")
		}
		e := consts + i*cStride
		name, err := r.stringAt(e + cName)
		if err != nil {
			return nil, fmt.Errorf("gHotSpotVMIntConstants entry %d: %w", i, err)
		}
		if name == "" {
			break
		}
		val, err := r.u32(e + cValue)
		if err != nil {
			return nil, err
		}
		vs.Constants[name] = int32(val)
	}
	return vs, nil
}

// Width returns the size in bytes of field f's type when the tables give
// it as 1, 2, 4 or 8, else def.
func (vs *VMStructs) Width(f VMField, def uint8) uint8 {
	switch n := vs.Sizes[f.Type]; n {
	case 1, 2, 4, 8:
		return uint8(n)
	}
	return def
}

// reader reads little-endian values and C strings from a process.
type reader struct{ m Memory }

func (r reader) read(addr uint64, n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := r.m.ReadAt(b, int64(addr)); err != nil {
		return nil, fmt.Errorf("read %d bytes at %#x: %w", n, addr, err)
	}
	return b, nil
}

func (r reader) u64(addr uint64) (uint64, error) {
	b, err := r.read(addr, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r reader) u32(addr uint64) (uint32, error) {
	b, err := r.read(addr, 4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

// uint reads an unsigned little-endian value of width 1, 2, 4 or 8 bytes.
func (r reader) uint(addr uint64, width uint8) (uint64, error) {
	if width != 1 && width != 2 && width != 4 && width != 8 {
		return 0, fmt.Errorf("read %d-byte value at %#x: unsupported width", width, addr)
	}
	b, err := r.read(addr, int(width))
	if err != nil {
		return 0, err
	}
	switch width {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.LittleEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.LittleEndian.Uint32(b)), nil
	}
	return binary.LittleEndian.Uint64(b), nil
}

// stringAt reads the char* at addr and the string it points to; "" for NULL.
func (r reader) stringAt(addr uint64) (string, error) {
	p, err := r.u64(addr)
	if err != nil || p == 0 {
		return "", err
	}
	var sb strings.Builder
	for sb.Len() < maxVMString {
		b := make([]byte, 64)
		n, err := r.m.ReadAt(b, int64(p)+int64(sb.Len()))
		if n == 0 {
			return "", fmt.Errorf("read string at %#x: %w", p, err)
		}
		if i := bytes.IndexByte(b[:n], 0); i >= 0 {
			sb.Write(b[:i])
			return sb.String(), nil
		}
		sb.Write(b[:n])
	}
	return "", fmt.Errorf("string at %#x is longer than %d bytes", p, maxVMString)
}

// OpenMemory opens the memory of process pid for reading.
func OpenMemory(pid int) (*os.File, error) {
	return os.Open(fmt.Sprintf("/proc/%d/mem", pid))
}
