package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// smallCapture is a complete capture with two sites, the second first seen
// in the second of three snapshots.
func smallCapture() *Capture {
	exit := 3
	return &Capture{
		Target:    Target{Pid: 42, Command: []string{"./leaky", "-n", "3"}, Runtime: RuntimeNative, ExitCode: &exit},
		StartedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Duration:  30 * time.Second,
		Sites: []Site{
			{
				ID: 7, Kind: KindMalloc,
				Stack:     Stack{Frames: []*Frame{{Address: 0x401000, Function: "leak", Module: "/bin/leaky", Offset: 0x1000, File: "leaky.c", Line: 9}}},
				LiveCount: 3, LiveBytes: 300, Allocs: 4, Frees: 1,
				Live: []Alloc{{Size: 100, Age: 25 * time.Second}, {Size: 100, Age: 15 * time.Second}, {Size: 100, Age: 5 * time.Second}},
			},
			{
				ID: 9, Kind: KindZlibInflate,
				Stack:     Stack{Frames: []*Frame{{Address: 0x7f00, Module: "/lib/libz.so.1", Offset: 0x700}}, Truncated: "/lib/libz.so.1 has no frame pointers"},
				LiveCount: 1, LiveBytes: 7160, Allocs: 1,
				Live: []Alloc{{Size: 7160, Age: 12 * time.Second}},
			},
		},
		Snapshots: []Snapshot{
			{At: 10 * time.Second, Sites: []SitePoint{{ID: 7, LiveCount: 1, LiveBytes: 100, Allocs: 1}}},
			{At: 20 * time.Second, Sites: []SitePoint{{ID: 7, LiveCount: 2, LiveBytes: 200, Allocs: 3, Frees: 1}, {ID: 9, LiveCount: 1, LiveBytes: 7160, Allocs: 1}}},
			{At: 30 * time.Second, Sites: []SitePoint{{ID: 7, LiveCount: 3, LiveBytes: 300, Allocs: 4, Frees: 1}, {ID: 9, LiveCount: 1, LiveBytes: 7160, Allocs: 1}}},
		},
		Lost:     Lost{UnknownFrees: 2},
		Objects:  []Object{{Path: "/bin/leaky", BuildID: "abc123", FramePointer: "yes", FPShare: 1}},
		Warnings: []string{"/lib/libz.so.1 has no frame pointers"},
	}
}

// streamCapture writes c as the tracer would: header at the start, each
// snapshot with the sites it introduces, the end record last.
func streamCapture(tb testing.TB, c *Capture) []byte {
	tb.Helper()
	var b bytes.Buffer
	start := *c
	start.Target.ExitCode = nil
	start.Objects = nil
	cw, err := NewCaptureWriter(&b, &start)
	if err != nil {
		tb.Fatal(err)
	}
	defined := map[uint64]bool{}
	for _, s := range c.Snapshots {
		var sites []Site
		for _, p := range s.Sites {
			if !defined[p.ID] {
				defined[p.ID] = true
				sites = append(sites, c.Sites[indexOf(c, p.ID)])
			}
		}
		if err := cw.WriteSnapshotOf(Sites(sites), s); err != nil {
			tb.Fatal(err)
		}
		for _, m := range c.Memory {
			if m.At == s.At {
				if err := cw.WriteMemory(m); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	if err := cw.Close(c); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func indexOf(c *Capture, id uint64) int {
	for i, s := range c.Sites {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// equalCaptures compares captures through their JSON form, which ignores
// the location pointer of StartedAt.
func equalCaptures(tb testing.TB, got, want *Capture) {
	tb.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		tb.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		tb.Errorf("captures differ:\n got %s\nwant %s", g, w)
		return
	}
	// Weights are not in a Site's JSON: nil and zeros are the same.
	for i := range got.Sites {
		gs, ws := &got.Sites[i], &want.Sites[i]
		for j := range gs.Live {
			if gs.Weight(j) != ws.Weight(j) {
				tb.Errorf("site %d allocation %d: weight %v, want %v", gs.ID, j, gs.Weight(j), ws.Weight(j))
				return
			}
		}
	}
}

func TestCaptureFileRoundTrip(t *testing.T) {
	want := smallCapture()
	data := streamCapture(t, want)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if !strings.HasPrefix(lines[0], `{"schema":"leakscope.capture/v2",`) {
		t.Errorf("header = %s", lines[0])
	}
	var types []string
	for _, l := range lines[1:] {
		var r struct{ Type string }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		types = append(types, r.Type)
	}
	if w := []string{"site", "snapshot", "site", "delta", "delta", "end"}; !reflect.DeepEqual(types, w) {
		t.Errorf("records = %q, want %q", types, w)
	}

	got, err := ReadCapture(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, got, want)

	var whole bytes.Buffer
	if err := writeCapture(&whole, want); err != nil {
		t.Fatal(err)
	}
	got, err = ReadCapture(&whole)
	if err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, got, want)
}

func TestReadCaptureIncomplete(t *testing.T) {
	want := smallCapture()
	data := streamCapture(t, want)
	cut := bytes.LastIndex(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) + 1 // start of the end record
	c, err := ReadCapture(bytes.NewReader(data[:cut+10]))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Snapshots) != 3 || c.Duration != 30*time.Second {
		t.Errorf("loaded %d snapshots, duration %v; want 3, 30s", len(c.Snapshots), c.Duration)
	}
	wantWarn := "capture is incomplete: ends after snapshot 3 (the tracer was interrupted)"
	if got := c.Warnings[len(c.Warnings)-1]; got != wantWarn {
		t.Errorf("last warning = %q, want %q", got, wantWarn)
	}
	if c.Target.ExitCode != nil {
		t.Errorf("exit code %d, want unknown", *c.Target.ExitCode)
	}
	for i, s := range c.Sites {
		w := want.Sites[i]
		if s.ID != w.ID || s.LiveCount != w.LiveCount || s.LiveBytes != w.LiveBytes || s.Allocs != w.Allocs || s.Frees != w.Frees || s.Live != nil {
			t.Errorf("site %d = %+v, want totals of %+v from the last snapshot", i, s, w)
		}
		if !reflect.DeepEqual(s.Stack, w.Stack) || s.Kind != w.Kind {
			t.Errorf("site %d lost its definition: %+v", i, s)
		}
	}
}

func TestReadCaptureEveryPrefix(t *testing.T) {
	data := streamCapture(t, smallCapture())
	headerEnd := bytes.IndexByte(data, '\n')
	endStart := bytes.LastIndex(data[:len(data)-1], []byte("\n")) + 1
	for i := 0; i <= len(data); i++ {
		c, err := ReadCapture(bytes.NewReader(data[:i]))
		if (c == nil) == (err == nil) {
			t.Fatalf("prefix %d: ReadCapture = %v, %v: want exactly one", i, c, err)
		}
		if i < headerEnd {
			if err == nil {
				t.Errorf("prefix %d of a %d-byte header loaded", i, headerEnd)
			}
			continue
		}
		if err != nil {
			t.Fatalf("prefix %d (header complete): %v", i, err)
		}
		complete := i >= len(data)-1 // the end record, with or without its newline
		incomplete := strings.HasPrefix(c.Warnings[len(c.Warnings)-1], "capture is incomplete")
		if complete == incomplete {
			t.Errorf("prefix %d of %d (end record at %d): complete %v, warnings %q", i, len(data), endStart, complete, c.Warnings)
		}
	}
}

func TestReadCaptureErrors(t *testing.T) {
	good := streamCapture(t, smallCapture())
	lines := strings.SplitAfter(string(good), "\n")
	header := lines[0]
	site := `{"type":"site","site":{"id":1,"kind":"malloc","stack":{"frames":[]}}}` + "\n"
	tests := []struct{ name, in, want string }{
		{"empty", "", "read capture: empty input: not a leakscope capture"},
		{"header cut", header[:20], "read capture: line 1: header cut short: not a complete capture"},
		{"not json", "hello\n", "read capture: line 1: not a leakscope capture: a record begins with 'h', not '{'"},
		{"zeros", "\x00\x00\x00\x00", "read capture: line 1: not a leakscope capture: a record begins with '\\x00', not '{'"},
		{"not json object", "{hello\n", "read capture: line 1: not a leakscope capture: invalid character 'h'"},
		{"zeros after a record", header + "\x00\x00", "read capture: line 2: not a leakscope capture: a record begins with '\\x00'"},
		{"snapshot wraps", header + site + strings.Replace(site, `"id":1`, `"id":2`, 1) + `{"type":"snapshot","snapshot":{"at_ns":1,"sites":[{"id":1,"live_bytes":18446744073709551615},{"id":2,"live_bytes":1}]}}` + "\n", "read capture: line 4: the snapshot's counts add up to more than 64 bits hold"},
		{"end live sizes wrap", header + site + strings.Replace(site, `"id":1`, `"id":2`, 1) + `{"type":"end","end":{"sites":[{"id":1,"live":[{"size":9223372036854775808,"age_ns":1}]},{"id":2,"live":[{"size":9223372036854775808,"age_ns":1}]}]}}` + "\n", "read capture: line 4: end record: the sites' counts add up to more than 64 bits hold"},
		{"end wraps", header + site + strings.Replace(site, `"id":1`, `"id":2`, 1) + `{"type":"end","end":{"sites":[{"id":1,"allocs":18446744073709551615},{"id":2,"allocs":2}]}}` + "\n", "read capture: line 4: end record: the sites' counts add up to more than 64 bits hold"},
		{"report", `{"schema":"leakscope.report/v1"}` + "\n", `read capture: line 1: schema "leakscope.report/v1" is not a leakscope capture`},
		{"no schema", "{}\n", `read capture: line 1: schema "" is not a leakscope capture`},
		{"v0", `{"schema":"leakscope.capture/v0"}`, `read capture: line 1: schema "leakscope.capture/v0" is not a leakscope capture`},
		{"v01", `{"schema":"leakscope.capture/v01"}`, `read capture: line 1: schema "leakscope.capture/v01" is not a leakscope capture`},
		{"newer", `{"schema":"leakscope.capture/v9"}` + "\n", "read capture: line 1: capture schema leakscope.capture/v9 is newer than this leakscope (v2): upgrade leakscope"},
		{"corrupt middle", header + site + "{oops\n" + site, "read capture: line 3: invalid character 'o'"},
		{"no type", header + "{}\n", "read capture: line 2: record without a type"},
		{"site without site", header + `{"type":"site"}` + "\n", "read capture: line 2: site record without a site"},
		{"twice", header + site + site, "read capture: line 3: site 1 defined twice"},
		{"undefined", header + `{"type":"snapshot","snapshot":{"at_ns":1,"sites":[{"id":5}]}}` + "\n", "read capture: line 2: snapshot refers to site 5 before its definition"},
		{"snapshot without snapshot", header + `{"type":"snapshot"}` + "\n", "read capture: line 2: snapshot record without a snapshot"},
		{"end undefined", header + `{"type":"end","end":{"sites":[{"id":5}]}}` + "\n", "read capture: line 2: end record refers to site 5, which has no definition"},
		{"end twice", header + site + `{"type":"end","end":{"sites":[{"id":1},{"id":1}]}}` + "\n", "read capture: line 3: end record lists site 1 twice"},
		{"end without end", header + `{"type":"end"}` + "\n", "read capture: line 2: end record without an end"},
		{"after end", string(good) + site, "read capture: line 8: site record after the end record"},
		{"wrong type", header + `{"type":"snapshot","snapshot":{"at_ns":"x"}}` + "\n", "read capture: line 2: json: cannot unmarshal"},
		{"snapshot twice", header + site + `{"type":"snapshot","snapshot":{"at_ns":1,"sites":[{"id":1,"allocs":1},{"id":1,"allocs":2}]}}` + "\n", "read capture: line 3: snapshot lists site 1 twice"},
		{"delta in v1", `{"schema":"leakscope.capture/v1"}` + "\n" + site + `{"type":"delta","snapshot":{"at_ns":1,"sites":[{"id":1,"allocs":1}]}}` + "\n", "read capture: line 3: delta record in a leakscope.capture/v1 capture"},
		{"delta order", header + site + strings.Replace(site, `"id":1`, `"id":2`, 1) + `{"type":"delta","snapshot":{"at_ns":1,"sites":[{"id":2,"allocs":1},{"id":1,"allocs":1}]}}` + "\n", "read capture: line 4: delta lists site 1 after site 2: not by ascending ID, or twice"},
		{"delta undefined", header + `{"type":"delta","snapshot":{"at_ns":1,"sites":[{"id":5}]}}` + "\n", "read capture: line 2: delta refers to site 5 before its definition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ReadCapture(strings.NewReader(tt.in))
			if c != nil || err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("ReadCapture = %v, %v\nwant error %s…", c, err, tt.want)
			}
		})
	}
}

func TestReadCaptureSkipsUnknownRecords(t *testing.T) {
	data := string(streamCapture(t, smallCapture()))
	i := strings.IndexByte(data, '\n') + 1
	data = data[:i] + `{"type":"added_in_v1_later","x":1}` + "\n" + data[i:]
	c, err := ReadCapture(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, c, smallCapture())
}

type failAfter struct {
	n   int
	buf bytes.Buffer
}

var errDiskFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errDiskFull
	}
	f.n--
	return f.buf.Write(p)
}

func TestCaptureWriterErrors(t *testing.T) {
	c := smallCapture()
	if _, err := NewCaptureWriter(&failAfter{}, c); !errors.Is(err, errDiskFull) || err.Error() != "write capture header: disk full" {
		t.Errorf("NewCaptureWriter error = %v", err)
	}

	var b bytes.Buffer
	cw, err := NewCaptureWriter(&b, c)
	if err != nil {
		t.Fatal(err)
	}
	err = cw.WriteSnapshotOf(Sites(c.Sites[:1]), c.Snapshots[1])
	if err == nil || err.Error() != "write capture snapshot 1: site 9 has no definition" {
		t.Errorf("snapshot with an undefined site: %v", err)
	}
	if err := cw.WriteSnapshotOf(Sites(c.Sites[:1]), c.Snapshots[0]); err != nil {
		t.Fatal(err)
	}
	dup := *c
	dup.Sites = []Site{c.Sites[0], c.Sites[0]}
	if err := cw.Close(&dup); err == nil || err.Error() != "write capture end: site 7 is listed twice" {
		t.Errorf("Close with a duplicate site: %v", err)
	}
	if err := cw.Close(c); err != nil {
		t.Fatal(err)
	}
	if err := cw.WriteSnapshotOf(Sites(nil), Snapshot{}); !errors.Is(err, errWriterClosed) {
		t.Errorf("WriteSnapshot after Close = %v", err)
	}
	if err := cw.Close(c); !errors.Is(err, errWriterClosed) {
		t.Errorf("second Close = %v", err)
	}

	// A failed write poisons the writer: nothing may follow a partial line.
	f := &failAfter{n: 1}
	cw, err = NewCaptureWriter(f, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := cw.WriteSnapshotOf(Sites(c.Sites), c.Snapshots[0]); !errors.Is(err, errDiskFull) {
		t.Fatalf("WriteSnapshot = %v", err)
	}
	f.n = 10
	if err := cw.WriteSnapshotOf(Sites(nil), c.Snapshots[1]); !errors.Is(err, errDiskFull) {
		t.Errorf("WriteSnapshot after a failed write = %v", err)
	}
	if got, err := ReadCapture(&f.buf); err != nil || len(got.Snapshots) != 0 {
		t.Errorf("after a failed write the file reads as %v, %v", got, err)
	}
}

// FuzzReadCapture checks that ReadCapture returns a capture exactly when it
// returns no error, and that what it loads writes and reads back the same.
func FuzzReadCapture(f *testing.F) {
	data := streamCapture(f, smallCapture())
	f.Add(data)
	for _, cut := range []int{0, 10, bytes.IndexByte(data, '\n') + 1, len(data) / 2, len(data) - 5} {
		f.Add(data[:cut])
	}
	f.Add([]byte(`{"schema":"leakscope.capture/v2"}`))
	f.Add(streamCapture(f, memoryCapture()))
	f.Add([]byte(`{"schema":"leakscope.capture/v1"}` + "\n" + `{"type":"snapshot","snapshot":{"at_ns":1,"sites":null}}`))
	f.Add([]byte(`{"schema":"leakscope.capture/v2"}` + "\n" + `{"type":"site","site":{"id":1,"kind":"malloc","stack":{"frames":[]}}}` + "\n" +
		`{"type":"snapshot","snapshot":{"at_ns":1,"sites":[{"id":1,"allocs":1}]}}` + "\n" + `{"type":"delta","snapshot":{"at_ns":2,"sites":[{"id":1}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadCapture(bytes.NewReader(data))
		if (c == nil) == (err == nil) {
			t.Fatalf("ReadCapture = %v, %v: want exactly one of capture and error", c, err)
		}
		if err != nil {
			return
		}
		var b bytes.Buffer
		if err := writeCapture(&b, c); err != nil {
			if strings.Contains(err.Error(), "json: error calling MarshalJSON for type time.Time") {
				return // a time.Time that parses but does not format (year > 9999)
			}
			t.Fatalf("write loaded capture: %v", err)
		}
		again, err := ReadCapture(&b)
		if err != nil {
			t.Fatalf("read rewritten capture: %v\n%s", err, b.Bytes())
		}
		equalCaptures(t, again, c)
		Rank(c, Options{}) // must not panic either
	})
}

// writeSizes records the size of every Write and what it wrote.
type writeSizes struct {
	sizes []int
	buf   bytes.Buffer
}

// Write fails for a write that does not end a line, but for the end
// record, the last line, which goes out in pieces.
func (w *writeSizes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	if len(p) == 0 {
		return 0, errors.New("empty write")
	}
	b := w.buf.Bytes()
	line := b[bytes.LastIndexByte(b, '\n')+1:] // the line being written
	if len(line) == 0 {
		line = p
	}
	if p[len(p)-1] != '\n' && !bytes.HasPrefix(line, []byte(`{"type":"end"`)) {
		return 0, errors.New("write does not end a line")
	}
	return w.buf.Write(p)
}

// TestCaptureWriterChunks: many site definitions go out in Writes of whole
// lines of at most writeChunk bytes, and read back whole.
func TestCaptureWriterChunks(t *testing.T) {
	c := synthCapture(20_000, 300_000, 3) // an end record of several pieces
	var w writeSizes
	if err := writeCapture(&w, c); err != nil {
		t.Fatal(err)
	}
	if len(w.sizes) < 3 {
		t.Errorf("%d writes of a %d-byte capture", len(w.sizes), w.buf.Len())
	}
	for i, n := range w.sizes { // the end record's pieces may pass by one allocation
		if n > writeChunk+4096 {
			t.Errorf("write %d: %d bytes, more than %d", i, n, writeChunk)
		}
	}
	got, err := ReadCapture(&w.buf)
	if err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, got, c)
}

// TestEndLineMatchesJSON: the end record's hand-made encoding is what
// json.Marshal writes, weights, empty and missing fields included.
func TestEndLineMatchesJSON(t *testing.T) {
	small := smallCapture()
	ends := []*captureEnd{
		{Sites: []siteTotals{}},
		{Sites: nil, endTail: endTail{Warnings: []string{"<&> \u2028"}}},
		{endHead: endHead{Target: small.Target, Duration: small.Duration}, endTail: endTail{Lost: small.Lost, Objects: small.Objects, Warnings: small.Warnings},
			Sites: []siteTotals{
				{ID: 1<<64 - 1, LiveCount: 2, LiveBytes: 3, Allocs: 4, Frees: 5, Live: []Alloc{{Size: 1, Age: -7}, {Size: 2, Age: 1 << 62}, {}, {}}, Weights: []float64{0, 1.5, 1e-7, 3e21}},
				{ID: 2, Live: []Alloc{}},
				{ID: 3},
			}},
	}
	sampled := synthCapture(100, 1000, 0)
	scaleSampledForTest(sampled)
	for _, c := range []*Capture{synthCapture(100, 1000, 0), sampled, synthCapture(1000, 300_000, 0)} {
		e := &captureEnd{endHead: endHead{Target: c.Target, Duration: c.Duration}, endTail: endTail{Lost: c.Lost, Objects: c.Objects, Warnings: c.Warnings, SampleBytes: c.SampleBytes, ExactBudget: c.ExactBudget}}
		for _, s := range c.Sites {
			e.Sites = append(e.Sites, siteTotals{ID: s.ID, LiveCount: s.LiveCount, LiveBytes: s.LiveBytes, Allocs: s.Allocs, Frees: s.Frees, Live: s.Live, Weights: s.LiveWeights})
		}
		ends = append(ends, e)
	}
	for i, e := range ends {
		want, err := json.Marshal(captureRecord{Type: "end", End: e})
		if err != nil {
			t.Fatal(err)
		}
		got, err := endLine(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("end %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// scaleSampledForTest gives every live allocation a weight, as a sampled
// capture has.
func scaleSampledForTest(c *Capture) {
	for i := range c.Sites {
		c.Sites[i].LiveWeights = make([]float64, len(c.Sites[i].Live))
		for j := range c.Sites[i].Live {
			c.Sites[i].LiveWeights[j] = 1 + float64(j)/3
		}
	}
}

// After the first snapshot, a capture file holds what changed: a thousand
// sites of which two move per snapshot take a few hundred bytes per
// snapshot, not a thousand points; a site no longer listed (its image
// exec'd away) goes; and the reader gives back every snapshot as written.
func TestCaptureDeltas(t *testing.T) {
	c := &Capture{Target: Target{Pid: 1, Runtime: RuntimeNative}, StartedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for id := uint64(1); id <= 1000; id++ {
		c.Sites = append(c.Sites, Site{ID: id, Kind: KindMalloc, Stack: Stack{Frames: []*Frame{{Address: id}}}})
	}
	points := make([]SitePoint, 0, 1000)
	for id := uint64(1); id <= 1000; id++ {
		points = append(points, SitePoint{ID: id, LiveCount: 1, LiveBytes: 16, Allocs: 1})
	}
	for i := 0; i < 10; i++ {
		snap := Snapshot{At: time.Duration(i+1) * time.Second, Sites: slices.Clone(points)}
		c.Snapshots = append(c.Snapshots, snap)
		points[0].LiveCount++ // two sites move
		points[0].Allocs++
		points[len(points)-1].Frees++
		if i == 4 {
			points = points[:len(points)-1] // site 1000 goes
		}
	}
	c.Duration = 10 * time.Second
	var b bytes.Buffer
	if err := writeCapture(&b, c); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var first, deltas int
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, `{"type":"snapshot"`):
			first = len(l)
		case strings.HasPrefix(l, `{"type":"delta"`):
			deltas++
			if len(l) > 200 {
				t.Errorf("delta of 2 sites is %d bytes: %s", len(l), l)
			}
		}
	}
	if deltas != 9 || first < 1000*50 {
		t.Errorf("%d deltas, first snapshot %d bytes; want 9 and a whole one", deltas, first)
	}
	got, err := ReadCapture(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Snapshots, c.Snapshots) {
		for i := range c.Snapshots {
			if !reflect.DeepEqual(got.Snapshots[i], c.Snapshots[i]) {
				t.Fatalf("snapshot %d read back differs: %d points, want %d", i, len(got.Snapshots[i].Sites), len(c.Snapshots[i].Sites))
			}
		}
	}
	if n := len(got.Snapshots[9].Sites); n != 999 {
		t.Errorf("last snapshot has %d sites, want 999", n)
	}
}

// TestCaptureWeightsRoundTrip: sampling weights (Site.LiveWeights) are
// written with their allocations and read back, and so are the sampling
// gap and the exact budget's numbers.
func TestCaptureWeightsRoundTrip(t *testing.T) {
	c := synthCapture(50, 500, 3)
	scaleSampledForTest(c)
	c.Sites[0].LiveWeights[1] = 0 // a traced one among sampled ones
	c.SampleBytes = 512 << 10
	c.ExactBudget = &ExactBudget{PerSecond: 10000, Calls: 12345, Past: 678}
	var b bytes.Buffer
	if err := writeCapture(&b, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCapture(&b)
	if err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, got, c)
	if got.Sites[0].Weight(2) == 0 {
		t.Errorf("weights not read back: %v", got.Sites[0].LiveWeights)
	}
	if got.SampleBytes != c.SampleBytes || got.ExactBudget == nil || *got.ExactBudget != *c.ExactBudget {
		t.Errorf("sampling read back as %d, %+v; want %d, %+v", got.SampleBytes, got.ExactBudget, c.SampleBytes, *c.ExactBudget)
	}
}

// countingSites is a SiteList that counts the sites it was asked to make.
type countingSites struct {
	sites Sites
	made  []uint64
}

func (c *countingSites) Len() int        { return c.sites.Len() }
func (c *countingSites) ID(i int) uint64 { return c.sites.ID(i) }
func (c *countingSites) Site(i int) Site {
	c.made = append(c.made, c.sites[i].ID)
	return c.sites[i]
}

// A capture writer makes a site only when it writes its definition, once
// per ID (the first of a repeated one), whatever else it is given; a
// snapshot that changed nothing shares its points with the one before
// when read back; and a capture without sites ends with "sites":[].
func TestCaptureWriterMakesOnlyNewSites(t *testing.T) {
	site := func(id uint64) Site {
		return Site{ID: id, Kind: KindMalloc, Stack: Stack{Frames: []*Frame{{Address: id}}}}
	}
	points := []SitePoint{{ID: 1, LiveCount: 1, LiveBytes: 8, Allocs: 1}, {ID: 2, LiveCount: 2, LiveBytes: 16, Allocs: 2}}
	var b bytes.Buffer
	cw, err := NewCaptureWriter(&b, &Capture{Target: Target{Pid: 1, Runtime: RuntimeNative}})
	if err != nil {
		t.Fatal(err)
	}
	first := &countingSites{sites: Sites{site(2), site(1), site(2)}}
	if err := cw.WriteSnapshotOf(first, Snapshot{At: time.Second, Sites: points}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first.made, []uint64{2, 1}) {
		t.Errorf("first snapshot made sites %v, want [2 1]: each new ID once, in the order given", first.made)
	}
	again := &countingSites{sites: Sites{site(1), site(2), site(3)}}
	if err := cw.WriteSnapshotOf(again, Snapshot{At: 2 * time.Second, Sites: points}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.made, []uint64{3}) {
		t.Errorf("second snapshot made sites %v, want [3]: the others are defined", again.made)
	}
	final := &Capture{Target: Target{Pid: 1, Runtime: RuntimeNative}, Duration: 2 * time.Second,
		Sites: []Site{site(1), site(2), site(3)}}
	if err := cw.Close(final); err != nil {
		t.Fatal(err)
	}
	c, err := ReadCapture(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Snapshots) != 2 || len(c.Snapshots[1].Sites) != 2 || &c.Snapshots[0].Sites[0] != &c.Snapshots[1].Sites[0] {
		t.Errorf("an unchanged snapshot does not share the points of the one before: %+v", c.Snapshots)
	}

	b.Reset()
	if err := writeCapture(&b, &Capture{Target: Target{Pid: 1, Runtime: RuntimeNative}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"sites":[]`) {
		t.Errorf("capture without sites: end record %q, want \"sites\":[] as before", b.String())
	}
}

// A capture of several processes keeps each site's process and the
// processes' descriptions through a capture file.
func TestCaptureProcessesRoundTrip(t *testing.T) {
	want := smallCapture()
	code := 0
	want.Processes = []Target{{Pid: 4243, Command: []string{"./child", "--x"}, Runtime: RuntimeNative, ExitCode: &code,
		Parent: want.Target.Pid, StartedAfter: 120 * time.Millisecond, ExitedAfter: 900 * time.Millisecond,
		Stops: &Stops{Count: 2, Longest: 31 * time.Millisecond, Total: 33 * time.Millisecond}}}
	want.Sites[len(want.Sites)-1].Pid = 4243
	got, err := ReadCapture(bytes.NewReader(streamCapture(t, want)))
	if err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, got, want)
	if p := got.Process(4243); p == nil || p.Parent != want.Target.Pid {
		t.Errorf("Process(4243) = %+v", p)
	}
	if got.Process(0) != &got.Target || got.Process(1) != nil {
		t.Error("Process(0) is not the target, or Process(1) found one")
	}
	// A pid no kernel hands out is a corrupt capture.
	data := string(streamCapture(t, want))
	if !strings.Contains(data, `"pid":4243}`) {
		t.Fatalf("no site pid in %s", data)
	}
	bad := strings.Replace(data, `"pid":4243}`, `"pid":99999999}`, 1)
	if _, err := ReadCapture(strings.NewReader(bad)); err == nil {
		t.Error("a site pid of 99999999 was accepted")
	}
}

// writeCapture writes all of c as a capture file: header, sites,
// snapshots and end record. A site c's snapshots mention but c.Sites lacks
// is an error.
func writeCapture(w io.Writer, c *Capture) error {
	cw, err := NewCaptureWriter(w, c)
	if err != nil {
		return err
	}
	for i, s := range c.Snapshots {
		sites := c.Sites
		if i > 0 {
			sites = nil
		}
		if err := cw.WriteSnapshotOf(Sites(sites), s); err != nil {
			return err
		}
		for _, m := range c.Memory {
			if m.At == s.At {
				if err := cw.WriteMemory(m); err != nil {
					return err
				}
			}
		}
	}
	return cw.Close(c)
}

// endLine encodes the end record with encodeEnd, in one buffer.
func endLine(end *captureEnd) (json.RawMessage, error) {
	var line []byte
	totals := func(i int) siteTotals { return end.Sites[i] }
	err := encodeEnd(end, len(end.Sites), totals, end.Sites == nil, false, func(p []byte) error {
		line = append(line, p...)
		return nil
	})
	return line, err
}

// memoryCapture is smallCapture with a memory breakdown at its second and
// third snapshots.
func memoryCapture() *Capture {
	c := smallCapture()
	c.Memory = []Memory{
		{At: 20 * time.Second, Processes: []ProcessMemory{{Pid: 42, RSS: 12 << 20, Parts: []MemoryPart{
			{Name: PartMalloc, Bytes: 200, Outstanding: 200}, {Name: PartAllocator, Bytes: 1<<20 - 200},
			{Name: PartCode, Bytes: 3 << 20}, {Name: PartUnexplained, Bytes: 8 << 20}}}}},
		{At: 30 * time.Second, Processes: []ProcessMemory{{Pid: 42, RSS: 13 << 20, Parts: []MemoryPart{
			{Name: PartMalloc, Bytes: 300, Outstanding: 300}, {Name: PartZlib, Bytes: 7160, Outstanding: 7160},
			{Name: PartAllocator, Bytes: 2<<20 - 7460}, {Name: PartStacks, Bytes: 1 << 20},
			{Name: PartCode, Bytes: 3 << 20}, {Name: PartUnexplained, Bytes: 7 << 20}}}}},
	}
	return c
}

// A capture's memory breakdowns come back from its file as recorded, in
// memory records after their snapshots; a breakdown whose parts do not
// add up to its RSS, that names a part leakscope does not make, or that
// follows no snapshot of its time, is a corrupt capture.
func TestCaptureMemoryRoundTrip(t *testing.T) {
	want := memoryCapture()
	data := string(streamCapture(t, want))
	if n := strings.Count(data, `{"type":"memory","memory":{"at_ns":`); n != 2 {
		t.Fatalf("%d memory records in %s", n, data)
	}
	got, err := ReadCapture(strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, got, want)
	pm, at := got.LastMemory(0)
	if pm == nil || at != 30*time.Second || pm.Part(PartZlib) != 7160 {
		t.Errorf("LastMemory = %+v at %v", pm, at)
	}
	for _, c := range []struct{ old, new string }{
		{`"rss_bytes":13631488`, `"rss_bytes":13631489`},
		{`"pid":42,"rss_bytes"`, `"pid":0,"rss_bytes"`},
		{`"name":"thread stacks"`, `"name":"threads"`},
		// A breakdown is taken with a snapshot: one of another time
		// (here the 30 s breakdown dated 25 s) follows none.
		{`"memory":{"at_ns":30000000000`, `"memory":{"at_ns":25000000000`},
	} {
		bad := strings.Replace(data, c.old, c.new, 1)
		if bad == data {
			t.Fatalf("no %s in %s", c.old, data)
		}
		if _, err := ReadCapture(strings.NewReader(bad)); err == nil {
			t.Errorf("a capture with %s for %s was accepted", c.new, c.old)
		}
	}
}

// A mmap.file site's files survive a capture file, streamed or whole.
func TestCaptureFilesRoundTrip(t *testing.T) {
	want := smallCapture()
	want.Sites = append(want.Sites, Site{
		ID: 11, Kind: KindMmapFile,
		Stack:     Stack{Frames: []*Frame{{Address: 0x402000, Function: "keep_index", Module: "/bin/leaky", Offset: 0x2000}}},
		LiveCount: 3, LiveBytes: 3 << 16, Allocs: 3,
		Live:  []Alloc{{Size: 1 << 16, Age: time.Second}, {Size: 1 << 16, Age: time.Second}, {Size: 1 << 16, Age: time.Second}},
		Files: []MappedFile{{Path: "/var/idx/00002.idx", Count: 2, Bytes: 2 << 16}, {Path: "/var/idx/\x1b[31m.idx", Count: 1, Bytes: 1 << 16}},
	})
	got, err := ReadCapture(bytes.NewReader(streamCapture(t, want)))
	if err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, got, want)
	if !reflect.DeepEqual(got.Sites[2].Files, want.Sites[2].Files) {
		t.Errorf("files = %+v, want %+v", got.Sites[2].Files, want.Sites[2].Files)
	}
	var whole bytes.Buffer
	if err := writeCapture(&whole, want); err != nil {
		t.Fatal(err)
	}
	if got, err = ReadCapture(&whole); err != nil {
		t.Fatal(err)
	}
	equalCaptures(t, got, want)
}

func TestSortFiles(t *testing.T) {
	got := SortFiles(map[string]*MappedFile{
		"/b": {Path: "/b", Count: 1, Bytes: 4096},
		"/a": {Path: "/a", Count: 1, Bytes: 4096},
		"/c": {Path: "/c", Count: 2, Bytes: 8192},
	})
	want := []MappedFile{{"/c", 2, 8192}, {"/a", 1, 4096}, {"/b", 1, 4096}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SortFiles = %+v, want %+v", got, want)
	}
}

// A site defined for a snapshot the series was thinned of, which the end
// record does not list, is not in the capture read back: no point of it
// is left, as in the live capture. One a kept snapshot has a point of
// stays, with no totals (a program image the target exec'd away from).
func TestCaptureKeepsTheSitesItsPointsName(t *testing.T) {
	final := smallCapture()
	before := func(id uint64, fn string) Site {
		return Site{ID: id, Kind: KindMalloc, Stack: Stack{Frames: []*Frame{{Address: 0x1234, Function: fn, Module: "/bin/sh"}}}}
	}
	for _, thinned := range []bool{false, true} {
		var buf bytes.Buffer
		cw, err := NewCaptureWriter(&buf, final)
		if err != nil {
			t.Fatal(err)
		}
		write := func(s Site, at time.Duration) {
			t.Helper()
			snap := Snapshot{At: at, Sites: []SitePoint{{ID: s.ID, LiveCount: 1, LiveBytes: 64, Allocs: 1}}}
			if err := cw.WriteSnapshotOf(Sites([]Site{s}), snap); err != nil {
				t.Fatal(err)
			}
		}
		// The first snapshot is always kept, the second the first
		// thinned away once there are more than MaxSnapshots.
		write(before(3, "first"), time.Millisecond)
		write(before(5, "second"), 2*time.Millisecond)
		n := 3
		if thinned {
			n = MaxSnapshots + 1
		}
		for i := range n {
			s := final.Snapshots[0]
			s.At = time.Duration(3+i) * time.Millisecond
			if err := cw.WriteSnapshotOf(Sites(final.Sites), s); err != nil {
				t.Fatal(err)
			}
		}
		if err := cw.Close(final); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCapture(&buf)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint64
		for _, s := range got.Sites {
			ids = append(ids, s.ID)
			if (s.ID == 3 || s.ID == 5) && (s.LiveCount != 0 || s.Allocs != 0) {
				t.Errorf("site %d of no final read has totals %+v", s.ID, s)
			}
		}
		want := []uint64{3, 5, 7, 9}
		if thinned {
			want = []uint64{3, 7, 9}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("thinned %v: sites read back %v, want %v", thinned, ids, want)
		}
		for _, s := range got.Snapshots {
			for _, p := range s.Sites {
				if !slices.Contains(ids, p.ID) {
					t.Errorf("thinned %v: snapshot at %v names site %d, which the capture lacks", thinned, s.At, p.ID)
				}
			}
		}
		var again bytes.Buffer
		if err := writeCapture(&again, got); err != nil {
			t.Fatalf("thinned %v: the capture read back does not write: %v", thinned, err)
		}
		back, err := ReadCapture(&again)
		if err != nil {
			t.Fatalf("thinned %v: read the capture written back: %v", thinned, err)
		}
		equalCaptures(t, back, got)
	}
}
