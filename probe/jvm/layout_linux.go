package jvm

import (
	"fmt"
	"strings"
)

// HotSpot renames, retypes and moves the fields leakscope reads from one
// release to the next. Rather than knowing releases, leakscope looks each
// field up by every name HotSpot has given it (fieldSpecs), reads it at
// the width its type has in the JVM's own tables, and picks the layout of
// a code blob from which fields the JVM describes (blobLayout). What a JVM
// lacks costs only what needs it (use), and is reported (Gap).

// use is what leakscope cannot do without a field.
type use uint8

const (
	useNames  use = iota // name any Java frame: NewMethods fails without it
	useCode              // walk compiled frames by frame size and name them
	useInline            // show the methods the JIT inlined into a compiled frame
	useLines             // place frames at source lines
	useLayout            // nothing: present or not, it picks a layout
)

func (u use) String() string {
	switch u {
	case useNames:
		return "Java frames stay unnamed ([interpreted])"
	case useCode:
		return "compiled Java frames are neither walked by their frame size nor named from the code heap"
	case useInline:
		return "compiled Java frames are shown without the methods the JIT inlined into them"
	case useLines:
		return "Java frames have no source lines"
	}
	return ""
}

// slot is a field as found: its offset in its object (or a static's
// address) and the width of its value in bytes.
type slot struct {
	off   uint64
	width uint8
	name  string // the name the JVM gave it; "" if it describes none
}

func (s slot) ok() bool { return s.name != "" }

// fieldSpec is one field leakscope reads: the names HotSpot releases gave
// it, tried in order (the first the JVM describes is used), and the width
// to read when the tables give no type.
type fieldSpec struct {
	names []string
	width uint8
	use   use
	dst   func(*methodLayout) *slot
}

// methodLayout is where a JVM keeps what Methods reads.
type methodLayout struct {
	constMethod, constants, nameIndex, poolHolder, poolLength slot
	klassName, symLength, symBody                             slot
	interpCode, stubBuffer, bufferLimit                       slot

	heaps, lowBound, highBound, arrayLen, arrayData       slot
	heapMemory, heapSegmap, heapLog2, spaceLow, spaceHigh slot
	frameSize, blobName, codeBegin, codeEnd, method       slot
	blobKind, compileID                                   slot

	pcOffset, scopeOffset, scopesPcs, pcsEnd, scopesData slot
	metadata, immutableData, mutableData, relocationSize slot
	mutableDataSize                                      slot

	flags, codeSize, sourceFile slot

	poolSize, heapBlock, pcDescSize, cmSize uint64
	// nmethodKind is CodeBlobKind::Nmethod, when blobKind is known.
	nmethodKind uint64
	blob        blobLayout
}

// blobLayout is how a JVM lays out its code blobs, picked from the fields
// its tables describe.
type blobLayout struct {
	// codeOffsets: a blob's code is given by int offsets from the blob
	// (CodeBlob::_code_offset, _data_offset; JDK 23 and later), not by
	// pointers (_code_begin, _code_end; JDK 9-22).
	codeOffsets bool
	// immutable: an nmethod's PcDescs and scopes are in a separate
	// immutable data block (nmethod::_immutable_data; JDK 23 and later),
	// at offsets from it; else in the blob, at offsets from the blob
	// (_scopes_pcs_offset, _dependencies_offset), the scopes at a
	// pointer (CompiledMethod::_scopes_data_begin).
	immutable bool
	// mutableMetadata: an nmethod's metadata (the Method*s its scopes
	// refer to) follows its relocations in the blob's mutable data
	// (CodeBlob::_mutable_data + _relocation_size; JDK 25 and later);
	// else it is at nmethod::_metadata_offset from the blob (JDK 22 and
	// earlier) or from its data section (JDK 23, 24).
	mutableMetadata bool
	// entryBCI is HotSpot's InvocationEntryBci: a scope's stored bci is
	// its bci minus this.
	entryBCI int
}

// fieldSpecs are the fields Methods reads, by every name known to HotSpot
// from JDK 9 (and 17, 21, 25 as checked in docs/jvm.md).
var fieldSpecs = []fieldSpec{
	{[]string{"Method::_constMethod"}, 8, useNames, func(l *methodLayout) *slot { return &l.constMethod }},
	{[]string{"ConstMethod::_constants"}, 8, useNames, func(l *methodLayout) *slot { return &l.constants }},
	{[]string{"ConstMethod::_name_index"}, 2, useNames, func(l *methodLayout) *slot { return &l.nameIndex }},
	{[]string{"ConstantPool::_pool_holder"}, 8, useNames, func(l *methodLayout) *slot { return &l.poolHolder }},
	{[]string{"ConstantPool::_length"}, 4, useNames, func(l *methodLayout) *slot { return &l.poolLength }},
	{[]string{"Klass::_name"}, 8, useNames, func(l *methodLayout) *slot { return &l.klassName }},
	// JDK 11 packs the length with a reference count (symLengthAlias).
	{[]string{"Symbol::_length", symLengthAlias}, 2, useNames, func(l *methodLayout) *slot { return &l.symLength }},
	{[]string{"Symbol::_body"}, 1, useNames, func(l *methodLayout) *slot { return &l.symBody }},
	{[]string{"AbstractInterpreter::_code"}, 8, useNames, func(l *methodLayout) *slot { return &l.interpCode }},
	{[]string{"StubQueue::_stub_buffer"}, 8, useNames, func(l *methodLayout) *slot { return &l.stubBuffer }},
	{[]string{"StubQueue::_buffer_limit"}, 4, useNames, func(l *methodLayout) *slot { return &l.bufferLimit }},

	{[]string{"CodeCache::_heaps"}, 8, useCode, func(l *methodLayout) *slot { return &l.heaps }},
	{[]string{"CodeCache::_low_bound"}, 8, useCode, func(l *methodLayout) *slot { return &l.lowBound }},
	{[]string{"CodeCache::_high_bound"}, 8, useCode, func(l *methodLayout) *slot { return &l.highBound }},
	{[]string{"GrowableArrayBase::_len", "GenericGrowableArray::_len"}, 4, useCode, func(l *methodLayout) *slot { return &l.arrayLen }},
	{[]string{"GrowableArray<int>::_data"}, 8, useCode, func(l *methodLayout) *slot { return &l.arrayData }},
	{[]string{"CodeHeap::_memory"}, 8, useCode, func(l *methodLayout) *slot { return &l.heapMemory }},
	{[]string{"CodeHeap::_segmap"}, 8, useCode, func(l *methodLayout) *slot { return &l.heapSegmap }},
	{[]string{"CodeHeap::_log2_segment_size"}, 4, useCode, func(l *methodLayout) *slot { return &l.heapLog2 }},
	{[]string{"VirtualSpace::_low"}, 8, useCode, func(l *methodLayout) *slot { return &l.spaceLow }},
	{[]string{"VirtualSpace::_high_boundary"}, 8, useCode, func(l *methodLayout) *slot { return &l.spaceHigh }},
	{[]string{"CodeBlob::_frame_size"}, 4, useCode, func(l *methodLayout) *slot { return &l.frameSize }},
	{[]string{"CodeBlob::_name"}, 8, useCode, func(l *methodLayout) *slot { return &l.blobName }},
	// Pointers first: JDK 17 describes _data_offset too, as the data's.
	{[]string{"CodeBlob::_code_begin", "CodeBlob::_code_offset"}, 8, useCode, func(l *methodLayout) *slot { return &l.codeBegin }},
	{[]string{"CodeBlob::_code_end", "CodeBlob::_data_offset"}, 8, useCode, func(l *methodLayout) *slot { return &l.codeEnd }},
	// CompiledMethod was folded into nmethod in JDK 23.
	{[]string{"nmethod::_method", "CompiledMethod::_method"}, 8, useCode, func(l *methodLayout) *slot { return &l.method }},
	{[]string{"CodeBlob::_kind"}, 1, useLayout, func(l *methodLayout) *slot { return &l.blobKind }},
	{[]string{"nmethod::_compile_id"}, 4, useLayout, func(l *methodLayout) *slot { return &l.compileID }},

	{[]string{"PcDesc::_pc_offset"}, 4, useInline, func(l *methodLayout) *slot { return &l.pcOffset }},
	{[]string{"PcDesc::_scope_decode_offset"}, 4, useInline, func(l *methodLayout) *slot { return &l.scopeOffset }},
	{[]string{"nmethod::_scopes_pcs_offset"}, 4, useInline, func(l *methodLayout) *slot { return &l.scopesPcs }},
	{[]string{"nmethod::_immutable_data"}, 8, useLayout, func(l *methodLayout) *slot { return &l.immutableData }},
	{[]string{"CodeBlob::_mutable_data"}, 8, useLayout, func(l *methodLayout) *slot { return &l.mutableData }},
	{[]string{"CodeBlob::_relocation_size"}, 4, useLayout, func(l *methodLayout) *slot { return &l.relocationSize }},
	{[]string{"CodeBlob::_mutable_data_size"}, 4, useLayout, func(l *methodLayout) *slot { return &l.mutableDataSize }},
	// Where PcDescs end and scopes start depend on the layout (blobLayout):
	// both are looked up by every name here and checked in resolveBlob.
	{[]string{"nmethod::_dependencies_offset", "nmethod::_scopes_data_offset"}, 4, useInline, func(l *methodLayout) *slot { return &l.pcsEnd }},
	{[]string{"CompiledMethod::_scopes_data_begin", "nmethod::_scopes_data_offset"}, 8, useInline, func(l *methodLayout) *slot { return &l.scopesData }},
	{[]string{"nmethod::_metadata_offset"}, 4, useLayout, func(l *methodLayout) *slot { return &l.metadata }},

	// JDK 21 made ConstMethod's flags a struct of their own.
	{[]string{"ConstMethod::_flags", "ConstMethod::_flags._flags"}, 2, useLines, func(l *methodLayout) *slot { return &l.flags }},
	{[]string{"ConstMethod::_code_size"}, 2, useLines, func(l *methodLayout) *slot { return &l.codeSize }},
	{[]string{"ConstantPool::_source_file_name_index"}, 2, useLines, func(l *methodLayout) *slot { return &l.sourceFile }},
}

// symLengthAlias is JDK 11's u4 Symbol::_length_and_refcount: the length
// is its high half, 2 bytes in on little-endian x86-64.
const symLengthAlias = "Symbol::_length_and_refcount"

// Constants: by every name HotSpot gave them.
var (
	hasLineTableNames = []string{"ConstMethodFlags::_misc_has_linenumber_table", "ConstMethod::_has_linenumber_table"}
	nmethodKindNames  = []string{"CodeBlobKind::Nmethod"}
)

// Gap is something a JVM's tables lack, and what leakscope cannot do
// without it.
type Gap struct {
	Loses string   // what is lost, as use.String says it
	Names []string // the fields or constants the JVM describes by none of their names
}

func (g Gap) String() string {
	return fmt.Sprintf("%s: its VMStructs describe no %s", g.Loses, strings.Join(g.Names, " nor "))
}

// lookup finds the first of names vs describes.
func lookup(vs *VMStructs, names []string, width uint8) (slot, bool) {
	for _, name := range names {
		f, ok := vs.Fields[name]
		if !ok {
			continue
		}
		s := slot{off: f.Offset, width: vs.Width(f, width), name: name}
		if f.Static {
			s.off = f.Address
		}
		if name == symLengthAlias {
			s.off, s.width = f.Offset+2, 2
		}
		return s, true
	}
	return slot{}, false
}

func constant(vs *VMStructs, names []string) (int32, bool) {
	for _, name := range names {
		if v, ok := vs.Constants[name]; ok {
			return v, true
		}
	}
	return 0, false
}

// resolve finds every field of fieldSpecs in vs and picks the blob layout.
// It returns what the JVM lacks, by use; a gap in useNames is fatal.
func resolve(vs *VMStructs) (methodLayout, map[use][]string) {
	var l methodLayout
	missing := map[use][]string{}
	for _, f := range fieldSpecs {
		s, ok := lookup(vs, f.names, f.width)
		if !ok {
			if f.use != useLayout {
				missing[f.use] = append(missing[f.use], strings.Join(f.names, " or "))
			}
			continue
		}
		*f.dst(&l) = s
	}
	l.poolSize = vs.Sizes["ConstantPool"]
	l.heapBlock = vs.Sizes["HeapBlock"]
	l.pcDescSize = vs.Sizes["PcDesc"]
	l.cmSize = vs.Sizes["ConstMethod"]
	if k, ok := constant(vs, nmethodKindNames); ok && l.blobKind.ok() {
		l.nmethodKind = uint64(k)
	} else {
		l.blobKind = slot{}
	}
	resolveBlob(&l, missing)
	return l, missing
}

// resolveBlob picks the code blob layout from the fields found, and drops
// fields whose meaning the layout contradicts.
func resolveBlob(l *methodLayout, missing map[use][]string) {
	b := &l.blob
	b.codeOffsets = l.codeBegin.name == "CodeBlob::_code_offset"
	if l.codeBegin.ok() && l.codeEnd.ok() && b.codeOffsets != (l.codeEnd.name == "CodeBlob::_data_offset") {
		// One pointer and one offset: no release has that.
		missing[useCode] = append(missing[useCode], "CodeBlob::_code_end (with "+l.codeBegin.name+")")
		l.codeBegin, l.codeEnd = slot{}, slot{}
	}
	b.immutable = l.immutableData.ok()
	wantEnd, wantData := "nmethod::_dependencies_offset", "CompiledMethod::_scopes_data_begin"
	if b.immutable {
		wantEnd, wantData = "nmethod::_scopes_data_offset", "nmethod::_scopes_data_offset"
	}
	if l.pcsEnd.ok() && l.pcsEnd.name != wantEnd {
		missing[useInline] = append(missing[useInline], wantEnd)
		l.pcsEnd = slot{}
	}
	if l.scopesData.ok() && l.scopesData.name != wantData {
		missing[useInline] = append(missing[useInline], wantData)
		l.scopesData = slot{}
	}
	b.mutableMetadata = l.mutableData.ok() && l.relocationSize.ok()
	if !b.mutableMetadata && !l.metadata.ok() {
		missing[useInline] = append(missing[useInline], "nmethod::_metadata_offset or CodeBlob::_mutable_data")
	}
	if b.immutable && !b.mutableMetadata && !b.codeOffsets {
		// Metadata at an offset from the data section needs its offset.
		missing[useInline] = append(missing[useInline], "CodeBlob::_data_offset")
	}
}

// gaps lists what the JVM lacks beyond naming, in the order of use.
func gaps(missing map[use][]string) []Gap {
	var out []Gap
	for _, u := range []use{useCode, useInline, useLines} {
		if len(missing[u]) > 0 {
			out = append(out, Gap{Loses: u.String(), Names: missing[u]})
		}
	}
	return out
}
