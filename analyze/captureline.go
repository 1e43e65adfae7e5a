package analyze

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// lineDecoder decodes the records that make up nearly all of a capture
// file, site definitions and snapshots, in the form CaptureWriter writes
// them, without reflection, and keeps one copy of each repeated string
// (module paths, file and function names). Anything else, and anything it
// is not sure about (an escaped string, an unknown or misspelled field, a
// null, a number out of range), it leaves to encoding/json: decodeLine
// then returns false. For a line it accepts, the result is what
// json.Unmarshal would give (FuzzCaptureLine).
//
// A capture of 100k sites holding 1M allocations is ~400 MB of these
// lines: encoding/json took 6.6 s and 900 MB to read it.
type lineDecoder struct {
	strs map[string]string
	// points is the size of the last snapshot: the next one is sized
	// for as many (a snapshot of 100k sites grew by append, 0.6 GB of
	// copies for 10 snapshots).
	points int
	// sites is how many sites the capture defined before its end record,
	// whose site totals are sized for as many (100k totals grown by
	// append were 41 MB of copies for 8.8 MB).
	sites  int
	frames []*Frame // scratch: a stack keeps an exact-size copy
	// Stacks share frames (Stack): one *Frame per distinct frame, found
	// by the frame's JSON text (a frame written again is the same bytes,
	// and is then not parsed again) or, for frames parsed or decoded by
	// encoding/json, by value.
	frameByText map[string]*Frame
	frameByVal  map[Frame]*Frame
}

func newLineDecoder() *lineDecoder {
	return &lineDecoder{strs: map[string]string{}, frameByText: map[string]*Frame{}, frameByVal: map[Frame]*Frame{}}
}

// frame returns the shared copy of f.
func (d *lineDecoder) frame(f Frame) *Frame {
	if p, ok := d.frameByVal[f]; ok {
		return p
	}
	p := &f
	d.frameByVal[f] = p
	return p
}

// shareFrames makes st's frames shared copies, as decodeLine gives them,
// for a stack encoding/json decoded: a null frame, which decodes to a
// zero Frame in a []Frame, becomes one here too.
func (d *lineDecoder) shareFrames(st *Stack) {
	for i, f := range st.Frames {
		if f == nil {
			f = &Frame{}
		}
		st.Frames[i] = d.frame(*f)
	}
}

// scanner walks one line; ok turns false at the first thing it does not
// handle, and every method is a no-op after that.
type scanner struct {
	b  []byte
	i  int
	ok bool
	d  *lineDecoder
	// src, when not nil, is where the line comes from (decodeStream): b
	// is then a window on it, refilled (fill) before each value of the
	// end record's fields, of its sites and of their live allocations,
	// where no part of b is held. eol says b holds the line's end,
	// complete that the line ended with a newline.
	src           *bufio.Reader
	window        int
	eol, complete bool
}

func (d *lineDecoder) decodeLine(line []byte, rec *captureRecord) bool {
	s := &scanner{b: line, ok: true, d: d}
	return s.record(rec)
}

// decodeStream decodes the line br is at as decodeLine does, reading it
// through a window of about window bytes instead of whole: the end record
// of 1M live allocations is a ~40 MB line, which was held whole while it
// was decoded. It returns false when the fast path does not take the line
// (then having read some of it, which the caller reads again: readCapture
// seeks back), or when a value of it does not fit in half a window.
// complete says whether the line ended with a newline.
//
// A value cut at the window's edge is never taken: every value is
// followed by a ',', '}' or ']' the scanner expects before it refills,
// and that expectation fails at the edge. Other lines decode as
// decodeLine decodes them when they fit in the window, and are not
// taken otherwise.
func (d *lineDecoder) decodeStream(br *bufio.Reader, window int, rec *captureRecord) (ok, complete bool) {
	s := &scanner{b: make([]byte, 0, window+br.Size()), ok: true, d: d, src: br, window: window}
	s.fill()
	ok = s.record(rec)
	return ok, s.complete
}

// fill, for a scanner on a window, drops what was read and reads the line
// on until the window is full or holds the line's end, if less than half
// a window is left.
func (s *scanner) fill() {
	if s.src == nil || s.eol || !s.ok || (s.i < len(s.b) && len(s.b)-s.i >= s.window/2) {
		return
	}
	n := copy(s.b, s.b[s.i:])
	s.b, s.i = s.b[:n], 0
	for len(s.b) < s.window && !s.eol {
		frag, err := s.src.ReadSlice('\n')
		s.b = append(s.b, frag...)
		switch {
		case err == bufio.ErrBufferFull:
		case err == io.EOF:
			s.eol = true
		case err != nil:
			s.eol, s.ok = true, false
		default:
			s.b = s.b[:len(s.b)-1]
			s.eol, s.complete = true, true
		}
	}
}

// record decodes a whole line into rec.
func (s *scanner) record(rec *captureRecord) bool {
	var r captureRecord
	s.object(func(key []byte) {
		switch string(key) {
		case "type":
			r.Type = s.str()
		case "site":
			if r.Site != nil {
				s.ok = false // a repeated object field merges in encoding/json
				return
			}
			r.Site = s.site()
		case "snapshot":
			if r.Snapshot != nil {
				s.ok = false
				return
			}
			r.Snapshot = s.snapshot()
		case "end":
			if r.End != nil {
				s.ok = false
				return
			}
			r.End = s.end()
		default:
			s.ok = false // unknown fields: encoding/json
		}
	})
	s.ws()
	for s.src != nil && s.ok && s.i == len(s.b) && !s.eol {
		s.fill() // white space to the window's edge: read on
		s.ws()
	}
	if !s.ok || s.i != len(s.b) || (s.src != nil && !s.eol) {
		return false
	}
	*rec = r
	return true
}

// maxPid is the largest pid Linux hands out (PID_MAX_LIMIT).
const maxPid = 1 << 22

func (s *scanner) site() *siteDef {
	var d siteDef
	stack := false
	s.object(func(key []byte) {
		switch string(key) {
		case "id":
			d.ID = s.uint()
		case "kind":
			d.Kind = Kind(s.str())
		case "pid":
			v := s.uint()
			if v > maxPid {
				s.ok = false
			}
			d.Pid = int(v)
		case "stack":
			if stack {
				s.ok = false
				return
			}
			stack = true
			s.object(func(key []byte) {
				switch string(key) {
				case "frames":
					d.Stack.Frames = s.frames()
				case "truncated":
					d.Stack.Truncated = s.str()
				default:
					s.ok = false
				}
			})
		default:
			s.ok = false
		}
	})
	return &d
}

func (s *scanner) frames() []*Frame {
	if s.null() {
		return nil
	}
	fs := s.d.frames[:0]
	s.array(func() {
		s.ws()
		start := s.i
		if end := objectEnd(s.b, start); end > 0 {
			if p, ok := s.d.frameByText[string(s.b[start:end])]; ok {
				s.i = end
				fs = append(fs, p)
				return
			}
		}
		var f Frame
		s.object(func(key []byte) {
			switch string(key) {
			case "address":
				f.Address = s.uint()
			case "function":
				f.Function = s.str()
			case "module":
				f.Module = s.str()
			case "offset":
				f.Offset = s.uint()
			case "file":
				f.File = s.str()
			case "line":
				f.Line = int(s.int())
			case "inlined":
				f.Inlined = s.bool()
			default:
				s.ok = false
			}
		})
		if !s.ok {
			return
		}
		p := s.d.frame(f)
		s.d.frameByText[string(s.b[start:s.i])] = p
		fs = append(fs, p)
	})
	s.d.frames = fs
	return append(make([]*Frame, 0, len(fs)), fs...)
}

// objectEnd returns the index just past the object that starts at b[i],
// or 0 when there is none or it holds an object or array. It does not
// check the object: a text it finds is only looked up among frames
// already parsed, whose text was exactly that.
func objectEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '{' {
		return 0
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '}':
			return i + 1
		case '{', '[':
			return 0
		}
	}
	return 0
}

func (s *scanner) snapshot() *Snapshot {
	var sn Snapshot
	s.object(func(key []byte) {
		switch string(key) {
		case "at_ns":
			sn.At = time.Duration(s.int())
		case "sites":
			if s.null() {
				sn.Sites = nil
				return
			}
			sn.Sites = make([]SitePoint, 0, s.d.points)
			s.array(func() {
				var p SitePoint
				s.object(func(key []byte) {
					switch string(key) {
					case "id":
						p.ID = s.uint()
					case "live_count":
						p.LiveCount = s.uint()
					case "live_bytes":
						p.LiveBytes = s.uint()
					case "allocs":
						p.Allocs = s.uint()
					case "frees":
						p.Frees = s.uint()
					default:
						s.ok = false
					}
				})
				sn.Sites = append(sn.Sites, p)
			})
			s.d.points = len(sn.Sites)
		default:
			s.ok = false
		}
	})
	return &sn
}

// end decodes the end record: its site totals and their live allocations
// (1M of them in a large capture) here, the rest with encoding/json.
func (s *scanner) end() *captureEnd {
	var e captureEnd
	seen := map[string]bool{}
	s.object(func(key []byte) {
		if seen[string(key)] {
			s.ok = false // a repeated object field merges in encoding/json
			return
		}
		seen[string(key)] = true
		k := string(key)
		s.fill() // key is not used after this
		switch k {
		case "duration_ns":
			e.Duration = time.Duration(s.int())
		case "sites":
			e.Sites = s.siteTotals()
		case "target":
			s.sub(&e.Target)
		case "lost":
			s.sub(&e.Lost)
		case "objects":
			s.sub(&e.Objects)
		case "warnings":
			s.sub(&e.Warnings)
		case "probes":
			s.sub(&e.Probes)
		case "sample_bytes":
			s.sub(&e.SampleBytes)
		case "exact_budget":
			s.sub(&e.ExactBudget)
		default:
			s.ok = false
		}
	})
	return &e
}

// minAllocJSON is the length of the shortest live allocation a capture
// can list: {"size":0,"age_ns":0} and a comma.
const minAllocJSON = len(`{"size":0,"age_ns":0},`)

func (s *scanner) siteTotals() []siteTotals {
	if s.null() {
		return nil
	}
	ts := make([]siteTotals, 0, s.d.sites)
	s.array(func() {
		s.fill()
		var t siteTotals
		s.object(func(key []byte) {
			switch string(key) {
			case "id":
				t.ID = s.uint()
			case "live_count":
				t.LiveCount = s.uint()
			case "live_bytes":
				t.LiveBytes = s.uint()
			case "allocs":
				t.Allocs = s.uint()
			case "frees":
				t.Frees = s.uint()
			case "live":
				t.Weights = nil
				if s.null() {
					t.Live = nil
					return
				}
				// Sized from live_count when it came first (as
				// CaptureWriter writes it), within what the rest of
				// the line can hold: 1M allocations grown by append
				// were 1.6 times their 16 MB, and as much again copied.
				t.Live = make([]Alloc, 0, min(t.LiveCount, uint64((len(s.b)-s.i)/minAllocJSON)))
				s.array(func() {
					s.fill()
					var a Alloc
					var w float64
					s.object(func(key []byte) {
						switch string(key) {
						case "size":
							a.Size = s.uint()
						case "age_ns":
							a.Age = time.Duration(s.int())
						case "weight":
							w = s.float()
						default:
							s.ok = false
						}
					})
					if w != 0 && t.Weights == nil {
						t.Weights = make([]float64, len(t.Live), cap(t.Live)+1)
					}
					if t.Weights != nil {
						t.Weights = append(t.Weights, w)
					}
					t.Live = append(t.Live, a)
				})
			case "files":
				s.sub(&t.Files)
			default:
				s.ok = false
			}
		})
		ts = append(ts, t)
	})
	return ts
}

// sub decodes the next value into v with encoding/json.
func (s *scanner) sub(v any) {
	s.ws()
	start := s.i
	s.skip()
	if s.ok && json.Unmarshal(s.b[start:s.i], v) != nil {
		s.ok = false
	}
}

// skip passes over one value. It need not check it: encoding/json does
// (sub), and a value it ends in the wrong place leaves what follows
// unparsable.
func (s *scanner) skip() {
	depth := 0
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			for s.i < len(s.b) && s.b[s.i] != '"' {
				if s.b[s.i] == '\\' {
					s.i++
				}
				s.i++
			}
			if s.i >= len(s.b) {
				s.ok = false
				return
			}
			s.i++
		case c == '{' || c == '[':
			depth++
			s.i++
		case c == '}' || c == ']':
			if depth == 0 {
				return
			}
			depth--
			s.i++
		case c == ',' && depth == 0:
			return
		default:
			s.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return
		}
	}
	if depth != 0 {
		s.ok = false
	}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// expect consumes byte c after optional white space.
func (s *scanner) expect(c byte) bool {
	s.ws()
	if !s.ok || s.i >= len(s.b) || s.b[s.i] != c {
		s.ok = false
		return false
	}
	s.i++
	return true
}

// peek reports whether the next byte after white space is c, and if so
// consumes it.
func (s *scanner) peek(c byte) bool {
	s.ws()
	if s.ok && s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null consumes a null literal if one comes next.
func (s *scanner) null() bool {
	s.ws()
	if s.ok && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// object calls field for each key of an object, positioned at its value.
// Keys must be plain strings matched exactly: encoding/json also matches
// them case-insensitively, which the fallback then does.
func (s *scanner) object(field func(key []byte)) {
	if !s.expect('{') {
		return
	}
	if s.peek('}') {
		return
	}
	for s.ok {
		key, ok := s.rawStr()
		if !ok || !s.expect(':') {
			s.ok = false
			return
		}
		field(key)
		if s.peek(',') {
			continue
		}
		s.expect('}')
		return
	}
}

// array calls elem for each element, positioned at it.
func (s *scanner) array(elem func()) {
	if !s.expect('[') {
		return
	}
	if s.peek(']') {
		return
	}
	for s.ok {
		elem()
		if s.peek(',') {
			continue
		}
		s.expect(']')
		return
	}
}

// rawStr returns the bytes of a string without escapes, control
// characters or invalid UTF-8 (which encoding/json rewrites).
func (s *scanner) rawStr() ([]byte, bool) {
	if !s.expect('"') {
		return nil, false
	}
	start := s.i
	ascii := true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			str := s.b[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(str) {
				s.ok = false
				return nil, false
			}
			return str, true
		case c == '\\' || c < 0x20:
			s.ok = false
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.i++
	}
	s.ok = false
	return nil, false
}

// str returns a string value, one copy per distinct value.
func (s *scanner) str() string {
	b, ok := s.rawStr()
	if !ok {
		return ""
	}
	if v, ok := s.d.strs[string(b)]; ok {
		return v
	}
	v := string(b)
	s.d.strs[v] = v
	return v
}

// number returns the bytes of an integer: an optional minus and digits,
// no fraction or exponent (a float in an integer field is an error for
// encoding/json, which the fallback then reports).
func (s *scanner) number() []byte {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	switch {
	case s.i == digits, s.b[digits] == '0' && s.i > digits+1:
		s.ok = false // no digits, or a leading zero
	case s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E'):
		s.ok = false
	}
	return s.b[start:s.i]
}

func (s *scanner) uint() uint64 {
	b := s.number()
	if !s.ok {
		return 0
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		s.ok = false
	}
	return v
}

func (s *scanner) int() int64 {
	b := s.number()
	if !s.ok {
		return 0
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		s.ok = false
	}
	return v
}

// float returns a number as encoding/json reads a float64.
func (s *scanner) float() float64 {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.b[digits] == '0' && s.i > digits+1) {
		s.ok = false
		return 0
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		frac := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		if s.i == frac {
			s.ok = false
			return 0
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		exp := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		if s.i == exp {
			s.ok = false
			return 0
		}
	}
	v, err := strconv.ParseFloat(string(s.b[start:s.i]), 64)
	if err != nil {
		s.ok = false
	}
	return v
}

func (s *scanner) bool() bool {
	s.ws()
	switch {
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false
	}
	s.ok = false
	return false
}
