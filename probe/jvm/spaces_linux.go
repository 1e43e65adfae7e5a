package jvm

import (
	"errors"
	"fmt"
)

// Spaces are the address ranges a JVM reserves for what it manages itself,
// [start, end) each, zero when unknown: the memory breakdown attributes
// the resident pages in them. All are reserved when the JVM starts and do
// not move.
type Spaces struct {
	// Heap is the Java heap, CollectedHeap::_reserved of
	// Universe::_collectedHeap (every collector's).
	Heap [2]uint64
	// Shared is the CDS archive (MetaspaceObj::_shared_metaspace_base to
	// _top): class metadata mapped from classes.jsa.
	Shared [2]uint64
	// KlassBase is where compressed class pointers are decoded from
	// (CompressedKlassPointers::_base): the CDS archive and the class
	// space follow it; 0 when the JVM uses none or its tables do not say.
	KlassBase uint64
	// Code is the code cache, CodeCache::_low_bound to _high_bound.
	Code [2]uint64
}

// spaceFields are the VMStructs fields Spaces reads, by every name known.
var spaceFields = struct {
	collectedHeap, reserved, start, words, klassBase, sharedBase, sharedTop []string
}{
	collectedHeap: []string{"Universe::_collectedHeap"},
	reserved:      []string{"CollectedHeap::_reserved"},
	start:         []string{"MemRegion::_start"},
	words:         []string{"MemRegion::_word_size"},
	// JDK 17 nests it in a NarrowPtrStruct.
	klassBase:  []string{"CompressedKlassPointers::_base", "CompressedKlassPointers::_narrow_klass._base"},
	sharedBase: []string{"MetaspaceObj::_shared_metaspace_base"},
	sharedTop:  []string{"MetaspaceObj::_shared_metaspace_top"},
}

// maxHeapBytes bounds a plausible Java heap reservation (HotSpot's own
// limit is far below 2^50).
const maxHeapBytes = 1 << 50

// readSpaces reads what Spaces holds from the target, each range on its
// own: one that cannot be read stays zero, and the error says which.
func readSpaces(r reader, vs *VMStructs, code [2]uint64) (Spaces, error) {
	sp := Spaces{Code: code}
	var errs []error
	f := func(names []string) (slot, bool) {
		s, ok := lookup(vs, names, 8)
		if !ok {
			errs = append(errs, fmt.Errorf("its VMStructs describe no %s", names[0]))
		}
		return s, ok
	}
	heap, ok1 := f(spaceFields.collectedHeap)
	res, ok2 := f(spaceFields.reserved)
	start, ok3 := f(spaceFields.start)
	words, ok4 := f(spaceFields.words)
	if ok1 && ok2 && ok3 && ok4 {
		if err := func() error {
			h, err := r.u64(heap.off)
			if err != nil || h == 0 {
				return fmt.Errorf("read Universe::_collectedHeap: %v", err)
			}
			lo, err := r.u64(h + res.off + start.off)
			if err != nil {
				return fmt.Errorf("read the Java heap's start: %w", err)
			}
			n, err := r.u64(h + res.off + words.off)
			if err != nil {
				return fmt.Errorf("read the Java heap's size: %w", err)
			}
			if lo == 0 || n == 0 || n > maxHeapBytes/8 || lo+8*n < lo {
				return fmt.Errorf("implausible Java heap at %#x of %d words", lo, n)
			}
			sp.Heap = [2]uint64{lo, lo + 8*n}
			return nil
		}(); err != nil {
			errs = append(errs, err)
		}
	}
	if s, ok := f(spaceFields.klassBase); ok {
		if v, err := r.u64(s.off); err == nil {
			sp.KlassBase = v
		} else {
			errs = append(errs, fmt.Errorf("read the compressed class base: %w", err))
		}
	}
	b, ok1 := f(spaceFields.sharedBase)
	t, ok2 := f(spaceFields.sharedTop)
	if ok1 && ok2 {
		lo, err1 := r.u64(b.off)
		hi, err2 := r.u64(t.off)
		if err1 == nil && err2 == nil && lo != 0 && hi > lo {
			sp.Shared = [2]uint64{lo, hi}
		}
	}
	return sp, errors.Join(errs...)
}

// Spaces reads the JVM's reserved ranges (Spaces); what it could not
// read stays zero, and the error says why.
func (m *Methods) Spaces() (Spaces, error) {
	return readSpaces(m.r, m.vs, m.code.Cache)
}

// Spaces returns the JVM's reserved ranges once its VMStructs could be
// read (Methods.Spaces); ok is false before.
func (n *Namer) Spaces() (Spaces, bool) {
	defer n.flush()
	if !n.loadMethods() {
		return Spaces{}, false
	}
	sp, err := n.methods.Spaces()
	if err != nil && sp.Heap[0] == 0 && alive(n.VM.Pid) {
		n.warnOnce("JVM %d: the memory breakdown cannot name the Java heap: %v", n.VM.Pid, err)
	}
	return sp, true
}
