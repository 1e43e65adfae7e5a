package analyze

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CaptureSchemaV1 identifies version 1 of the capture file format: every
// snapshot record lists every site.
const CaptureSchemaV1 = "leakscope.capture/v1"

// CaptureSchemaV2 identifies version 2, which CaptureWriter writes: after
// the first snapshot, delta records list only the sites that changed.
const CaptureSchemaV2 = "leakscope.capture/v2"

const (
	captureSchemaPrefix  = "leakscope.capture/v"
	captureSchemaVersion = 2
)

// A capture file is JSON Lines, one record per line, so that a writer
// killed mid-capture leaves every record before the last one intact:
//
//	{"schema":"leakscope.capture/v2","target":…,"started_at":…}
//	{"type":"site","site":{"id":1,"kind":"malloc","stack":{…}}}
//	{"type":"snapshot","snapshot":{"at_ns":…,"sites":[…]}}
//	{"type":"delta","snapshot":{"at_ns":…,"sites":[…]}}
//	{"type":"memory","memory":{"at_ns":…,"processes":[…]}}
//	…
//	{"type":"end","end":{"duration_ns":…,"sites":[…],"lost":…}}
//
// The header comes first. A site record defines a site (its kind and
// symbolized stack) before any snapshot or the end record mentions its ID,
// which makes the file self-contained. A snapshot record lists every site
// that holds or held anything then; a delta record (v2) is the snapshot
// that follows the previous one with only the sites whose point changed,
// by ascending ID, a point of all zeros for a site no longer listed (one
// the target exec'd away from: a site is never listed with nothing). At
// 100k sites a snapshot is ~4 MB; a delta holds what moved. The end record
// holds what is known only at the end: each site's final totals and live
// allocations, the lost counters, the objects, the warnings and the
// target's exit code. A memory record (added within v2) holds the
// memory breakdown taken with a snapshot, right after it (the same at_ns). Readers skip records
// of types they do not know, so a
// version may add record types and fields that readers can do without;
// anything else needs a new schema version (delta records did).

type captureHeader struct {
	Schema      string    `json:"schema"`
	Target      Target    `json:"target"`
	StartedAt   time.Time `json:"started_at"`
	Objects     []Object  `json:"objects,omitempty"`
	Warnings    []string  `json:"warnings,omitempty"`
	Probes      *ProbeSet `json:"probes,omitempty"`
	SampleBytes uint64    `json:"sample_bytes,omitempty"`
}

type siteDef struct {
	ID    uint64 `json:"id"`
	Kind  Kind   `json:"kind"`
	Stack Stack  `json:"stack"`
	Pid   int    `json:"pid,omitempty"`
}

type siteTotals struct {
	ID        uint64
	LiveCount uint64
	LiveBytes uint64
	Allocs    uint64
	Frees     uint64
	Live      []Alloc
	Weights   []float64 // Site.LiveWeights
	Files     []MappedFile
}

// liveAlloc is an allocation as a capture file lists it: with its weight.
type liveAlloc struct {
	Size   uint64        `json:"size"`
	Age    time.Duration `json:"age_ns"`
	Weight float64       `json:"weight,omitempty"`
}

// siteTotalsJSON is siteTotals as a capture file holds it.
type siteTotalsJSON struct {
	ID        uint64       `json:"id"`
	LiveCount uint64       `json:"live_count"`
	LiveBytes uint64       `json:"live_bytes"`
	Allocs    uint64       `json:"allocs"`
	Frees     uint64       `json:"frees"`
	Live      []liveAlloc  `json:"live,omitempty"`
	Files     []MappedFile `json:"files,omitempty"`
}

// toJSON is t in a capture file's form: each live allocation with its
// weight, if sampled.
func (t siteTotals) toJSON() siteTotalsJSON {
	j := siteTotalsJSON{ID: t.ID, LiveCount: t.LiveCount, LiveBytes: t.LiveBytes, Allocs: t.Allocs, Frees: t.Frees, Files: t.Files}
	if t.Live != nil {
		j.Live = make([]liveAlloc, len(t.Live))
		for i, a := range t.Live {
			j.Live[i] = liveAlloc{Size: a.Size, Age: a.Age}
			if i < len(t.Weights) {
				j.Live[i].Weight = t.Weights[i]
			}
		}
	}
	return j
}

func (t siteTotals) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.toJSON())
}

func (t *siteTotals) UnmarshalJSON(b []byte) error {
	// Into what t holds, as encoding/json decodes a struct: fields the
	// object lacks keep their values.
	j := t.toJSON()
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = siteTotals{ID: j.ID, LiveCount: j.LiveCount, LiveBytes: j.LiveBytes, Allocs: j.Allocs, Frees: j.Frees, Files: j.Files}
	if j.Live != nil {
		t.Live = make([]Alloc, len(j.Live))
		for i, a := range j.Live {
			t.Live[i] = Alloc{Size: a.Size, Age: a.Age}
			if a.Weight != 0 && t.Weights == nil {
				t.Weights = make([]float64, len(j.Live))
			}
			if t.Weights != nil {
				t.Weights[i] = a.Weight
			}
		}
	}
	return nil
}

// captureEnd is the end record: endHead, the sites' totals, then endTail,
// in that order (encodeEnd writes the sites between the two).
type captureEnd struct {
	endHead
	Sites []siteTotals `json:"sites"`
	endTail
}

type endHead struct {
	Target   Target        `json:"target"`
	Duration time.Duration `json:"duration_ns"`
}

type endTail struct {
	Lost        Lost         `json:"lost"`
	Objects     []Object     `json:"objects,omitempty"`
	Warnings    []string     `json:"warnings,omitempty"`
	Probes      *ProbeSet    `json:"probes,omitempty"`
	SampleBytes uint64       `json:"sample_bytes,omitempty"`
	ExactBudget *ExactBudget `json:"exact_budget,omitempty"`
	Processes   []Target     `json:"processes,omitempty"`
}

type captureRecord struct {
	Type     string      `json:"type"` // "site", "snapshot" or "end"
	Site     *siteDef    `json:"site,omitempty"`
	Snapshot *Snapshot   `json:"snapshot,omitempty"`
	End      *captureEnd `json:"end,omitempty"`
	Memory   *Memory     `json:"memory,omitempty"`
}

// CaptureWriter writes a capture file as the capture happens: the header
// first, then one line per site definition and snapshot, then the end
// record. Each call hands the underlying writer whole lines, definitions
// before the records that refer to them, and keeps nothing buffered when it
// returns, so when the tracer dies the file holds every snapshot written so
// far and ReadCapture loads it.
//
// After a failed write or Close, every later call returns an error, since
// appending after a partial line would corrupt the file.
type CaptureWriter struct {
	w io.Writer
	// defined holds the IDs of the sites defined so far, ascending: 100k
	// of them were ~3 MB as a map, held while tracing.
	defined   []uint64
	snapshots int
	last      []SitePoint   // the previous snapshot's points by ascending ID, for the next delta
	lastAt    time.Duration // the previous snapshot's time
	err       error         // sticky
}

var errWriterClosed = errors.New("capture writer is closed")

// NewCaptureWriter writes the header of c (its target, start time, objects
// and warnings so far) to w and returns a writer for the rest. It ignores
// c's sites and snapshots: WriteSnapshotOf and Close write those.
func NewCaptureWriter(w io.Writer, c *Capture) (*CaptureWriter, error) {
	cw := &CaptureWriter{w: w}
	h := captureHeader{
		Schema:      CaptureSchemaV2,
		Target:      c.Target,
		StartedAt:   c.StartedAt,
		Objects:     c.Objects,
		Warnings:    c.Warnings,
		Probes:      c.Probes,
		SampleBytes: c.SampleBytes,
	}
	if err := cw.write("header", h); err != nil {
		return nil, err
	}
	return cw, nil
}

// SiteList is a list of sites whose definitions a capture writer may
// write: each site is made only when its definition is (a tracer's 100k
// new sites with their frames, made at once, were ~25 MB at its first
// snapshot). Only a site's ID, kind and stack are written.
type SiteList interface {
	Len() int
	ID(i int) uint64
	Site(i int) Site
}

// Sites is a SiteList of sites made already.
type Sites []Site

func (s Sites) Len() int        { return len(s) }
func (s Sites) ID(i int) uint64 { return s[i].ID }
func (s Sites) Site(i int) Site { return s[i] }

// WriteSnapshotOf appends a definition for each of sites not defined yet (only
// their ID, kind and stack are written; earlier definitions win), then s:
// the first snapshot whole, each later one as a delta from the one before.
// Every site s lists must be defined by now, so that the file never refers
// to a stack it does not hold, and listed once. A point of all zeros (a
// site the kernel made for an allocation it then could not record) says
// what leaving the site out says: it is not written. A site is made
// (SiteList.Site) only when its definition is written.
func (cw *CaptureWriter) WriteSnapshotOf(sites SiteList, s Snapshot) error {
	if cw.err != nil {
		return cw.err
	}
	n := cw.snapshots + 1
	defs, newIDs := cw.newDefs(sites)
	for _, p := range s.Sites {
		if !cw.isDefined(p.ID) && !containsID(newIDs, p.ID) {
			return fmt.Errorf("write capture snapshot %d: site %d has no definition", n, p.ID)
		}
	}
	// The points by ascending ID, without zeros: a copy, the caller's
	// slice may change after the call.
	cur := slices.DeleteFunc(slices.Clone(s.Sites), func(p SitePoint) bool { return p == SitePoint{ID: p.ID} })
	byID := func(a, b SitePoint) int { return cmp.Compare(a.ID, b.ID) }
	if !slices.IsSortedFunc(cur, byID) {
		slices.SortFunc(cur, byID)
	}
	for i := 1; i < len(cur); i++ {
		if cur[i].ID == cur[i-1].ID {
			return fmt.Errorf("write capture snapshot %d: site %d is listed twice", n, cur[i].ID)
		}
	}
	rec := captureRecord{Type: "snapshot", Snapshot: &s}
	if len(cur) < len(s.Sites) {
		rec.Snapshot = &Snapshot{At: s.At, Sites: cur}
	}
	if cw.snapshots > 0 {
		rec = captureRecord{Type: "delta", Snapshot: &Snapshot{At: s.At, Sites: delta(cw.last, cur)}}
	}
	err := cw.writeN(fmt.Sprintf("snapshot %d", n), len(defs)+1, func(i int) any {
		if i < len(defs) {
			site := sites.Site(defs[i])
			return defRecord(&site)
		}
		return rec
	})
	if err != nil {
		return err
	}
	cw.define(newIDs)
	cw.snapshots = n
	cw.last = cur
	cw.lastAt = s.At
	return nil
}

// WriteMemory appends a memory breakdown (Memory), taken with the
// snapshot written last.
func (cw *CaptureWriter) WriteMemory(m Memory) error {
	if cw.err != nil {
		return cw.err
	}
	return cw.write(fmt.Sprintf("memory %d", cw.snapshots), captureRecord{Type: "memory", Memory: &m})
}

// delta lists, by ascending ID, the points of cur that differ from prev's,
// and a point of zeros for each site of prev that cur does not list; both
// are by ascending ID.
func delta(prev, cur []SitePoint) []SitePoint {
	out, _ := sizedPoints(func(emit func(SitePoint)) error {
		i := 0
		for _, p := range cur {
			for i < len(prev) && prev[i].ID < p.ID {
				emit(SitePoint{ID: prev[i].ID})
				i++
			}
			if i < len(prev) && prev[i].ID == p.ID {
				if prev[i] != p {
					emit(p)
				}
				i++
				continue
			}
			emit(p)
		}
		for ; i < len(prev); i++ {
			emit(SitePoint{ID: prev[i].ID})
		}
		return nil
	})
	return out
}

// applyDelta returns the snapshot after prev (its points by ascending ID)
// that delta d describes: d's points replace prev's of the same ID, a
// point of zeros removes one. d's points must be by ascending ID. An
// empty delta returns prev itself: the snapshots of a capture are read,
// never changed, and one that changed nothing shares its points, as a
// tracer's do (a steady target's snapshots were 3.8 MB each at 100k
// sites).
func applyDelta(prev []SitePoint, d []SitePoint) ([]SitePoint, error) {
	if len(d) == 0 {
		return prev, nil
	}
	return sizedPoints(func(emit func(SitePoint)) error {
		i := 0
		for k, p := range d {
			if k > 0 && d[k-1].ID >= p.ID {
				return fmt.Errorf("delta lists site %d after site %d: not by ascending ID, or twice", p.ID, d[k-1].ID)
			}
			for i < len(prev) && prev[i].ID < p.ID {
				emit(prev[i])
				i++
			}
			if i < len(prev) && prev[i].ID == p.ID {
				i++
			}
			if p != (SitePoint{ID: p.ID}) {
				emit(p)
			}
		}
		for _, p := range prev[i:] {
			emit(p)
		}
		return nil
	})
}

// sizedPoints returns the points gen emits in a slice of exactly their
// number: gen runs twice, first to count them. At 100k sites that all
// moved, appending grew a snapshot's points through ~8 MB of copies.
func sizedPoints(gen func(emit func(SitePoint)) error) ([]SitePoint, error) {
	n := 0
	if err := gen(func(SitePoint) { n++ }); err != nil {
		return nil, err
	}
	out := make([]SitePoint, 0, n)
	err := gen(func(p SitePoint) { out = append(out, p) })
	return out, err
}

// Close defines the sites of final not defined yet and writes the end
// record: final's target, duration, site totals with their live
// allocations, lost counters, objects and warnings. It does not close the
// underlying writer.
func (cw *CaptureWriter) Close(final *Capture) error {
	if cw.err != nil {
		return cw.err
	}
	// Its sites' totals are made as they are encoded: 100k of them were
	// 9 MB, and a map of their IDs 3 MB more, at the end of a run.
	end := &captureEnd{
		endHead: endHead{Target: final.Target, Duration: final.Duration},
		endTail: endTail{
			Lost:        final.Lost,
			Objects:     final.Objects,
			Warnings:    final.Warnings,
			Probes:      final.Probes,
			SampleBytes: final.SampleBytes,
			ExactBudget: final.ExactBudget,
			Processes:   final.Processes,
		},
	}
	ids := make([]uint64, len(final.Sites))
	for i := range final.Sites {
		ids[i] = final.Sites[i].ID
	}
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return fmt.Errorf("write capture end: site %d is listed twice", ids[i])
		}
	}
	ids = nil
	// The last snapshot, taken as the tracer stopped, goes out too: the
	// trends of a re-read capture are then the live report's.
	if n := len(final.Snapshots); n > 0 && (cw.snapshots == 0 || final.Snapshots[n-1].At > cw.lastAt) {
		if err := cw.WriteSnapshotOf(Sites(final.Sites), final.Snapshots[n-1]); err != nil {
			return err
		}
	}
	defs, _ := cw.newDefs(Sites(final.Sites))
	err := cw.writeN("end", len(defs), func(i int) any { return defRecord(&final.Sites[defs[i]]) })
	if err != nil {
		return err
	}
	totals := func(i int) siteTotals {
		s := &final.Sites[i]
		return siteTotals{ID: s.ID, LiveCount: s.LiveCount, LiveBytes: s.LiveBytes, Allocs: s.Allocs, Frees: s.Frees, Live: s.Live, Weights: s.LiveWeights, Files: s.Files}
	}
	// The end line goes out in pieces as it is encoded, not as one
	// buffer: 1M live allocations are ~40 MB of line. A reader drops a
	// last line cut short, so a capture killed meanwhile reads as one
	// without its end.
	err = encodeEnd(end, len(final.Sites), totals, false, true, func(p []byte) error {
		if _, err := cw.w.Write(p); err != nil {
			cw.err = fmt.Errorf("write capture end: %w", err)
			return cw.err
		}
		return nil
	})
	if err != nil {
		if cw.err == nil {
			return fmt.Errorf("write capture end: %w", err)
		}
		return err
	}
	cw.err = errWriterClosed
	cw.defined, cw.last = nil, nil // a closed writer needs neither
	return nil
}

// newDefs returns the indices in sites of the sites not defined yet, the
// first of each ID, ascending, and their IDs, ascending. Their records
// are made as they are written (defRecord): 100k of them, made at once
// with their pointers, were ~13 MB at the first snapshot.
func (cw *CaptureWriter) newDefs(sites SiteList) ([]int, []uint64) {
	var defs []int
	for i := range sites.Len() {
		if !cw.isDefined(sites.ID(i)) {
			defs = append(defs, i)
		}
	}
	// The first of each ID: by ID, then by index (a stable sort).
	slices.SortStableFunc(defs, func(a, b int) int { return cmp.Compare(sites.ID(a), sites.ID(b)) })
	defs = slices.CompactFunc(defs, func(a, b int) bool { return sites.ID(a) == sites.ID(b) })
	ids := make([]uint64, len(defs))
	for k, i := range defs {
		ids[k] = sites.ID(i)
	}
	slices.Sort(defs)
	return defs, ids
}

// isDefined reports whether site id is defined.
func (cw *CaptureWriter) isDefined(id uint64) bool { return containsID(cw.defined, id) }

// containsID reports whether ascending ids holds id.
func containsID(ids []uint64, id uint64) bool {
	_, ok := slices.BinarySearch(ids, id)
	return ok
}

// defRecord is the definition record of s.
func defRecord(s *Site) captureRecord {
	return captureRecord{Type: "site", Site: &siteDef{ID: s.ID, Kind: s.Kind, Stack: s.Stack, Pid: s.Pid}}
}

// define adds ids (ascending, none defined yet) to the defined sites.
func (cw *CaptureWriter) define(ids []uint64) {
	if len(ids) == 0 {
		return
	}
	merged := make([]uint64, 0, len(cw.defined)+len(ids))
	i, j := 0, 0
	for i < len(cw.defined) || j < len(ids) {
		if j == len(ids) || (i < len(cw.defined) && cw.defined[i] < ids[j]) {
			merged = append(merged, cw.defined[i])
			i++
		} else {
			merged = append(merged, ids[j])
			j++
		}
	}
	cw.defined = merged
}

// writeChunk is the most write buffers before handing whole lines to w.
const writeChunk = 4 << 20

// write encodes each value as one line and hands them to w in order, in
// Writes of whole lines, each at most writeChunk bytes unless one line is
// longer: the first snapshot of 100k sites defines them all, 400 MB of
// lines that were one buffer.
func (cw *CaptureWriter) write(what string, vs ...any) error {
	return cw.writeN(what, len(vs), func(i int) any { return vs[i] })
}

// writeN is write of value(0), ..., value(n-1), each made when its line
// is encoded.
func (cw *CaptureWriter) writeN(what string, n int, value func(i int) any) error {
	var b bytes.Buffer
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		if _, err := cw.w.Write(b.Bytes()); err != nil {
			cw.err = fmt.Errorf("write capture %s: %w", what, err)
			return cw.err
		}
		b.Reset()
		return nil
	}
	// Each line is encoded into one buffer, reused: json.Marshal made a
	// new one per line, ~300 MB of garbage while 100k sites of ~20
	// frames were defined. An Encoder writes json.Marshal's bytes and a
	// newline.
	var lb bytes.Buffer
	enc := json.NewEncoder(&lb)
	for i := range n {
		v := value(i)
		lb.Reset()
		if raw, ok := v.(json.RawMessage); ok {
			lb.Write(raw)
			lb.WriteByte('\n')
		} else if err := enc.Encode(v); err != nil {
			return fmt.Errorf("write capture %s: %w", what, err)
		}
		line := lb.Bytes() // with its newline
		if b.Len() > 0 && b.Len()+len(line) > writeChunk {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(line) > writeChunk { // alone anyway: not copied into b
			if _, err := cw.w.Write(line); err != nil {
				cw.err = fmt.Errorf("write capture %s: %w", what, err)
				return cw.err
			}
			continue
		}
		b.Write(line)
	}
	return flush()
}

// weightOf is weights[i], 0 past its end.
func weightOf(weights []float64, i int) float64 {
	if i < len(weights) {
		return weights[i]
	}
	return 0
}

// encodeEnd encodes the end record as json.Marshal does, newline included
// when newline is set, and hands it to emit in pieces of about writeChunk
// bytes, each in a buffer reused for the next (emit must not keep it).
// json.Marshal's buffer doubled its way to ~40 MB for 1M live allocations
// and was copied twice; one buffer sized for the line was still ~50 MB.
// Its sites are totals(0), ..., totals(n-1), not end.Sites; null says
// they are nil (JSON null), not empty.
func encodeEnd(end *captureEnd, n int, totals func(int) siteTotals, null, newline bool, emit func([]byte) error) error {
	head, err := json.Marshal(end.endHead)
	if err != nil {
		return err
	}
	tail, err := json.Marshal(end.endTail)
	if err != nil {
		return err
	}
	size := len(head) + len(tail) + 64 // and the newline
	for i := range n {
		size += 120 + 40*len(totals(i).Live)
	}
	b := make([]byte, 0, min(size, writeChunk+4096))
	flush := func() error {
		if len(b) < writeChunk {
			return nil
		}
		err := emit(b)
		b = b[:0]
		return err
	}
	b = append(b, `{"type":"end","end":`...)
	b = append(b, head[:len(head)-1]...) // without its closing brace
	b = append(b, `,"sites":`...)
	if null {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range n {
			t := totals(i)
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = strconv.AppendUint(b, t.ID, 10)
			b = append(b, `,"live_count":`...)
			b = strconv.AppendUint(b, t.LiveCount, 10)
			b = append(b, `,"live_bytes":`...)
			b = strconv.AppendUint(b, t.LiveBytes, 10)
			b = append(b, `,"allocs":`...)
			b = strconv.AppendUint(b, t.Allocs, 10)
			b = append(b, `,"frees":`...)
			b = strconv.AppendUint(b, t.Frees, 10)
			if len(t.Live) > 0 {
				b = append(b, `,"live":[`...)
				for j, a := range t.Live {
					if j > 0 {
						b = append(b, ',')
					}
					if w := weightOf(t.Weights, j); w != 0 { // floats: as encoding/json writes them
						w, err := json.Marshal(liveAlloc{Size: a.Size, Age: a.Age, Weight: w})
						if err != nil {
							return err
						}
						b = append(b, w...)
					} else {
						b = append(b, `{"size":`...)
						b = strconv.AppendUint(b, a.Size, 10)
						b = append(b, `,"age_ns":`...)
						b = strconv.AppendInt(b, int64(a.Age), 10)
						b = append(b, '}')
					}
					if err := flush(); err != nil {
						return err
					}
				}
				b = append(b, ']')
			}
			if len(t.Files) > 0 {
				fs, err := json.Marshal(t.Files)
				if err != nil {
					return err
				}
				b = append(b, `,"files":`...)
				b = append(b, fs...)
			}
			b = append(b, '}')
			if err := flush(); err != nil {
				return err
			}
		}
		b = append(b, ']')
	}
	b = append(b, ',')
	b = append(b, tail[1:]...) // without its opening brace
	b = append(b, '}')
	if newline {
		b = append(b, '\n')
	}
	return emit(b)
}

// ReadCapture reads a capture file. A file that ends early, because the
// tracer was killed or the disk filled up, still loads: everything up to the
// last complete record is kept, the last line is dropped if it is cut short,
// each site's totals come from the last snapshot, and a warning says the
// capture is incomplete. Live allocation ages, lost counters and the exit
// code are then unknown. Every other defect is an error naming its line.
func ReadCapture(r io.Reader) (*Capture, error) {
	c, err := readCapture(bufio.NewReader(r), r)
	if err != nil {
		return nil, fmt.Errorf("read capture: %w", err)
	}
	return c, nil
}

// readCapture reads a capture from br, which reads r: when r can seek,
// the end record is decoded as it is read (readEnd).
func readCapture(br *bufio.Reader, r io.Reader) (*Capture, error) {
	seeker, _ := r.(io.ReadSeeker)
	var buf []byte
	line, complete, err := readLine(br, &buf)
	if err != nil {
		return nil, fmt.Errorf("line 1: %w", err)
	}
	if len(line) == 0 && !complete {
		return nil, errors.New("empty input: not a leakscope capture")
	}
	var h captureHeader
	if err := json.Unmarshal(line, &h); err != nil {
		if !complete {
			return nil, errors.New("line 1: header cut short: not a complete capture")
		}
		return nil, fmt.Errorf("line 1: not a leakscope capture: %w", err)
	}
	version, err := checkSchema(h.Schema)
	if err != nil {
		return nil, fmt.Errorf("line 1: %w", err)
	}
	c := &Capture{
		Target:    h.Target,
		StartedAt: h.StartedAt,
		Sites:     []Site{},
		Objects:   h.Objects,
		Warnings:  h.Warnings,
		Probes:    h.Probes,
		// The header's gap, for a capture cut short; the end's replaces it.
		SampleBytes: h.SampleBytes,
	}
	index := map[uint64]int{} // site ID to index in c.Sites
	var end *captureEnd
	var last []SitePoint // the last snapshot's points by ascending ID, for a delta
	// snapAt is the last snapshot's time, which a memory record's must
	// be (snapped: one was read).
	var snapAt time.Duration
	snapped := false
	fast := newLineDecoder()
	for n := 2; complete; n++ {
		var rec captureRecord
		var streamed bool
		fast.sites = len(c.Sites)
		if seeker != nil {
			if streamed, complete, err = readEnd(br, seeker, fast, &rec); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
		}
		if !streamed {
			line, complete, err = readLine(br, &buf)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
		}
		if streamed {
			// decoded as read: the end record in CaptureWriter's form
		} else if len(line) == 0 && !complete {
			break // the file ends with a newline
		} else if fast.decodeLine(line, &rec) {
			// decoded: a site or snapshot record in CaptureWriter's form
		} else if err := json.Unmarshal(line, &rec); err != nil {
			if !complete {
				break // cut short while it was written
			}
			return nil, fmt.Errorf("line %d: %w", n, err)
		} else if rec.Site != nil {
			fast.shareFrames(&rec.Site.Stack)
		}
		if end != nil {
			return nil, fmt.Errorf("line %d: %s record after the end record", n, rec.Type)
		}
		switch rec.Type {
		case "":
			return nil, fmt.Errorf("line %d: record without a type", n)
		case "site":
			if rec.Site == nil {
				return nil, fmt.Errorf("line %d: site record without a site", n)
			}
			if _, ok := index[rec.Site.ID]; ok {
				return nil, fmt.Errorf("line %d: site %d defined twice", n, rec.Site.ID)
			}
			if rec.Site.Pid < 0 || rec.Site.Pid > maxPid {
				return nil, fmt.Errorf("line %d: site %d has pid %d, which no process can have", n, rec.Site.ID, rec.Site.Pid)
			}
			index[rec.Site.ID] = len(c.Sites)
			c.Sites = append(c.Sites, Site{ID: rec.Site.ID, Kind: rec.Site.Kind, Stack: rec.Site.Stack, Pid: rec.Site.Pid})
		case "snapshot", "delta":
			if rec.Snapshot == nil {
				return nil, fmt.Errorf("line %d: %s record without a snapshot", n, rec.Type)
			}
			for _, p := range rec.Snapshot.Sites {
				if _, ok := index[p.ID]; !ok {
					return nil, fmt.Errorf("line %d: %s refers to site %d before its definition", n, rec.Type, p.ID)
				}
			}
			snap := *rec.Snapshot
			byID := func(a, b SitePoint) int { return cmp.Compare(a.ID, b.ID) }
			if rec.Type == "snapshot" {
				// A point of all zeros says what leaving it out says;
				// a site listed twice is a defect.
				seen := make(map[uint64]bool, len(snap.Sites))
				for _, p := range snap.Sites {
					if seen[p.ID] {
						return nil, fmt.Errorf("line %d: snapshot lists site %d twice", n, p.ID)
					}
					seen[p.ID] = true
				}
				snap.Sites = slices.DeleteFunc(snap.Sites, func(p SitePoint) bool { return p == SitePoint{ID: p.ID} })
			}
			switch {
			case rec.Type == "delta":
				if version < 2 {
					return nil, fmt.Errorf("line %d: delta record in a %s capture", n, h.Schema)
				}
				if snap.Sites, err = applyDelta(last, snap.Sites); err != nil {
					return nil, fmt.Errorf("line %d: %w", n, err)
				}
				last = snap.Sites
			case slices.IsSortedFunc(snap.Sites, byID):
				last = snap.Sites
			default: // a whole snapshot lists its points in any order
				last = slices.SortedFunc(slices.Values(snap.Sites), byID)
			}
			if !pointsFit(snap.Sites) {
				return nil, fmt.Errorf("line %d: the %s's counts add up to more than 64 bits hold: not a capture leakscope wrote", n, rec.Type)
			}
			if len(snap.Sites) == 0 {
				snap.Sites = nil // listed as null or [], or emptied: the same
			}
			snapAt, snapped = snap.At, true
			c.Snapshots = ThinSnapshots(append(c.Snapshots, snap))
		case "memory":
			if rec.Memory == nil {
				return nil, fmt.Errorf("line %d: memory record without a memory", n)
			}
			if !snapped || rec.Memory.At != snapAt {
				return nil, fmt.Errorf("line %d: memory record at %v follows no snapshot of that time", n, rec.Memory.At)
			}
			if err := checkMemory(rec.Memory, c.Memory); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			c.Memory = ThinMemory(append(c.Memory, *rec.Memory))
		case "end":
			if rec.End == nil {
				return nil, fmt.Errorf("line %d: end record without an end", n)
			}
			if err := applyEnd(c, rec.End, index); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			end = rec.End
		}
	}
	if end == nil {
		finishIncomplete(c, index)
	} else {
		dropUnreferenced(c, end)
	}
	return c, nil
}

// dropUnreferenced takes out of c the sites that neither the end record
// lists nor any snapshot kept has a point of: defined for a snapshot the
// series was thinned of. The live capture has the sites of its last read
// and those its snapshots have points of (one of a program image exec'd
// away from, with no totals), and so does c then.
func dropUnreferenced(c *Capture, end *captureEnd) {
	keep := make(map[uint64]bool, len(end.Sites))
	for _, t := range end.Sites {
		keep[t.ID] = true
	}
	if len(keep) == len(c.Sites) {
		return // the end lists every site defined (each once)
	}
	for _, s := range c.Snapshots {
		for _, p := range s.Sites {
			keep[p.ID] = true
		}
	}
	c.Sites = slices.DeleteFunc(c.Sites, func(s Site) bool { return !keep[s.ID] })
}

// endPrefix begins the end record as CaptureWriter writes it.
const endPrefix = `{"type":"end",`

// endWindow is how much of the end record is held at a time while it is
// decoded (lineDecoder.decodeStream).
const endWindow = 1 << 20

// readEnd decodes the end record as it reads it, when it comes next in
// CaptureWriter's form: the ~40 MB line of 1M live allocations is then
// never held whole. It returns false, with br where it was (r seeked back
// to the line), when the record is not next or the fast path does not
// take it: readLine then reads it whole for encoding/json.
func readEnd(br *bufio.Reader, r io.ReadSeeker, d *lineDecoder, rec *captureRecord) (ok, complete bool, err error) {
	if p, _ := br.Peek(len(endPrefix)); string(p) != endPrefix {
		return false, false, nil
	}
	pos, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return false, false, nil // a pipe, say: read it whole
	}
	start := pos - int64(br.Buffered())
	if ok, complete := d.decodeStream(br, endWindow, rec); ok {
		return true, complete, nil
	}
	*rec = captureRecord{}
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return false, false, err
	}
	br.Reset(r)
	return false, false, nil
}

// MaxCaptureLine bounds one line of a capture file. The longest lines
// leakscope writes, a snapshot or end record at 100k sites, are tens of
// MB; the end record, the longest, is decoded as it is read when the
// file can seek.
const MaxCaptureLine = 256 << 20

// readLine returns the next line without its newline, and whether it had
// one: a line without is the last, and may have been cut short. The line
// is in *buf, reused from line to line: nothing decoded keeps it.
func readLine(br *bufio.Reader, buf *[]byte) ([]byte, bool, error) {
	b := (*buf)[:0]
	for {
		frag, err := br.ReadSlice('\n')
		if len(b) == 0 && len(frag) > 0 && frag[0] != '{' && frag[0] != '\n' {
			// Every record is a JSON object: a file of zeros (sparse)
			// or of anything else is refused at its first byte, not
			// read whole.
			return nil, false, fmt.Errorf("not a leakscope capture: a record begins with %q, not '{'", frag[0])
		}
		b = append(b, frag...)
		*buf = b
		if len(b) > MaxCaptureLine {
			return nil, false, fmt.Errorf("a line longer than %s: not a capture leakscope wrote", FormatBytes(MaxCaptureLine))
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			return b, false, nil
		case err != nil:
			return nil, false, err
		}
		return b[:len(b)-1], true, nil
	}
}

// checkSchema accepts v1 and v2, returning the version, and explains
// every other schema.
func checkSchema(s string) (int, error) {
	v, ok := strings.CutPrefix(s, captureSchemaPrefix)
	n, err := strconv.Atoi(v)
	switch {
	case !ok || err != nil || n < 1 || strconv.Itoa(n) != v:
		return 0, fmt.Errorf("schema %q is not a leakscope capture", s)
	case n > captureSchemaVersion:
		return 0, fmt.Errorf("capture schema %s is newer than this leakscope (v%d): upgrade leakscope", s, captureSchemaVersion)
	}
	return n, nil
}

// pointsFit reports whether the points' counters, and so the sum of any
// of them (totals, groups, filters), fit in 64 bits.
func pointsFit(ps []SitePoint) bool {
	var count, bytes, allocs, frees, carry uint64
	for _, p := range ps {
		count = addFit(count, p.LiveCount, &carry)
		bytes = addFit(bytes, p.LiveBytes, &carry)
		allocs = addFit(allocs, p.Allocs, &carry)
		frees = addFit(frees, p.Frees, &carry)
	}
	return carry == 0
}

// addFit returns a+b, and sets *carry when the sum wraps.
func addFit(a, b uint64, carry *uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	*carry |= c
	return s
}

// applyEnd sets c's final state from the end record. The sites' counts
// must add up within 64 bits, so that no total computed from them wraps.
func applyEnd(c *Capture, end *captureEnd, index map[uint64]int) error {
	seen := make(map[uint64]bool, len(end.Sites))
	// The sums of every counter, and of the live allocations' sizes,
	// over all sites; carry is set when one wraps.
	var count, bytes, allocs, frees, live, carry uint64
	for _, t := range end.Sites {
		for _, a := range t.Live {
			live = addFit(live, a.Size, &carry)
		}
		count = addFit(count, t.LiveCount, &carry)
		bytes = addFit(bytes, t.LiveBytes, &carry)
		allocs = addFit(allocs, t.Allocs, &carry)
		frees = addFit(frees, t.Frees, &carry)
		if carry != 0 {
			return errors.New("end record: the sites' counts add up to more than 64 bits hold: not a capture leakscope wrote")
		}
		i, ok := index[t.ID]
		if !ok {
			return fmt.Errorf("end record refers to site %d, which has no definition", t.ID)
		}
		if seen[t.ID] {
			return fmt.Errorf("end record lists site %d twice", t.ID)
		}
		seen[t.ID] = true
		s := &c.Sites[i]
		s.LiveCount, s.LiveBytes, s.Allocs, s.Frees, s.Live, s.LiveWeights, s.Files = t.LiveCount, t.LiveBytes, t.Allocs, t.Frees, t.Live, t.Weights, t.Files
	}
	c.Target = end.Target
	c.Duration = end.Duration
	c.Lost = end.Lost
	c.Objects = end.Objects
	c.Warnings = end.Warnings
	if end.Probes != nil {
		c.Probes = end.Probes
	}
	c.SampleBytes = end.SampleBytes
	c.ExactBudget = end.ExactBudget
	c.Processes = end.Processes
	return nil
}

// finishIncomplete fills in what the missing end record would have held,
// as far as the last snapshot tells, and says so in a warning.
func finishIncomplete(c *Capture, index map[uint64]int) {
	w := "capture is incomplete: ends before the first snapshot (the tracer was interrupted)"
	if n := len(c.Snapshots); n > 0 {
		last := c.Snapshots[n-1]
		c.Duration = last.At
		for _, p := range last.Sites {
			s := &c.Sites[index[p.ID]]
			s.LiveCount += p.LiveCount
			s.LiveBytes += p.LiveBytes
			s.Allocs += p.Allocs
			s.Frees += p.Frees
		}
		w = fmt.Sprintf("capture is incomplete: ends after snapshot %d (the tracer was interrupted)", n)
	}
	c.Warnings = append(c.Warnings, w)
}
