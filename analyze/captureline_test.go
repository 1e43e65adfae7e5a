package analyze

import (
	"bufio"
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// captureLines are record lines as CaptureWriter writes them and as a hand
// or another tool might: every one must decode as encoding/json decodes it,
// by the fast path or by falling back.
var captureLines = []string{
	`{"type":"site","site":{"id":7,"kind":"malloc","stack":{"frames":[{"address":4198400,"function":"leak","module":"/bin/x","offset":4096,"file":"x.c","line":12},{"address":1,"offset":0,"inlined":true}],"truncated":"walk stopped"}}}`,
	`{"type":"site","site":{"id":8,"kind":"zlib.inflate","stack":{"frames":null}}}`,
	`{"type":"site","site":{"id":9,"kind":"malloc","stack":{"frames":[]}}}`,
	`{"type":"snapshot","snapshot":{"at_ns":1000000000,"sites":[{"id":7,"live_count":3,"live_bytes":300,"allocs":4,"frees":1}]}}`,
	`{"type":"snapshot","snapshot":{"at_ns":-5,"sites":null}}`,
	`{"type":"snapshot","snapshot":{"at_ns":0,"sites":[]}}`,
	` { "type" : "site" , "site" : { "id" : 1 , "stack" : { "frames" : [ { "line" : -3 } ] } } } `,
	`{"type":"site","site":{"id":1,"kind":"k\u00e9","stack":{"frames":[]}}}`,        // escape: fallback
	`{"type":"site","site":{"id":1,"kind":"ké","stack":{"frames":[]}}}`,             // UTF-8 as is
	`{"type":"site","site":{"id":1,"kind":"` + "\xff" + `","stack":{"frames":[]}}}`, // invalid UTF-8: fallback
	`{"Type":"site","site":{"ID":1}}`,                                               // case-insensitive keys: fallback
	`{"type":"site","site":{"id":1,"stack":{"frames":[{"address":1}]},"stack":{"truncated":"x"}}}`,
	`{"type":"site","site":{"id":1,"extra":true}}`,
	`{"type":"snapshot","snapshot":{"at_ns":1.5}}`,
	`{"type":"snapshot","snapshot":{"at_ns":1e3}}`,
	`{"type":"snapshot","snapshot":{"at_ns":01}}`,
	`{"type":"snapshot","snapshot":{"sites":[{"id":-1}]}}`,
	`{"type":"snapshot","snapshot":{"sites":[{"id":18446744073709551616}]}}`,
	`{"type":"snapshot","snapshot":{"sites":[{"id":18446744073709551615}]}}`,
	`{"type":"end","end":{"duration_ns":5,"sites":[],"lost":{}}}`,
	`{"type":"end","end":{"target":{"pid":4,"command":["a \"b\"","}"],"runtime":"native","exit_code":0},"duration_ns":5,"sites":[{"id":7,"live_count":1,"live_bytes":2,"allocs":3,"frees":2,"live":[{"size":2,"age_ns":9},{"size":1,"age_ns":1,"weight":8193.5e-1}]},{"id":8,"live":null}],"lost":{"unknown_frees":3},"objects":[{"path":"/x","frame_pointer":"yes","fp_share":1}],"warnings":["w, {x}"]}}`,
	`{"type":"end","end":{"duration_ns":5,"lost":{"unknown_frees":3},"lost":{"stack_errors":1}}}`,
	`{"type":"end","end":{"sites":[{"live":[{"weight":1.}]}]}}`,
	`{"type":"end","end":{"sites":[{"live":[{"weight":-0.5E+2}]}]}}`,
	`{"type":"end","end":{"sites":[{"live":[{"weight":1e999}]}]}}`,
	`{"type":"end","end":{"target":{"pid":"x"}}}`,
	`{"type":"end","end":{"warnings":["unterminated]}}`,
	`{"type":"end","end":{"objects":[{"path":"/x"}]]}}`,
	`{"type":"site","site":null}`,
	`{"type":null}`,
	`{"type":"site"}x`,
	`{"type":"site",}`,
	`{"type":"site","site":{"id":1,"stack":{"frames":[{"inlined":false,"inlined":true}]}}}`,
	`{"type":"added_in_v1_later","x":1}`,
	`{}`,
	``,
}

// decodeBoth decodes line by the fast path, falling back as readCapture
// does, and by encoding/json alone.
func decodeBoth(line []byte) (fast, slow captureRecord, fastErr, slowErr error) {
	if !newLineDecoder().decodeLine(line, &fast) {
		fast = captureRecord{}
		fastErr = json.Unmarshal(line, &fast)
	}
	slowErr = json.Unmarshal(line, &slow)
	return
}

func checkLine(t *testing.T, line []byte) {
	t.Helper()
	var r captureRecord
	ok := newLineDecoder().decodeLine(line, &r)
	if ok {
		var want captureRecord
		if err := json.Unmarshal(line, &want); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json rejects it: %v", line, err)
		}
		if !reflect.DeepEqual(r, want) {
			g, _ := json.Marshal(r)
			w, _ := json.Marshal(want)
			t.Fatalf("fast path on %q:\n got %s\nwant %s", line, g, w)
		}
	}
	fast, slow, fe, se := decodeBoth(line)
	if (fe == nil) != (se == nil) || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: decoded %+v (%v), encoding/json %+v (%v)", line, fast, fe, slow, se)
	}
	checkStream(t, line, ok, r)
}

// checkStream decodes line as read through windows of several sizes
// (decodeStream): what it takes must be what decodeLine gives, and a
// window twice the line's size must take what decodeLine takes.
func checkStream(t *testing.T, line []byte, lineOK bool, want captureRecord) {
	t.Helper()
	if bytes.IndexByte(line, '\n') >= 0 {
		return // two lines to a reader
	}
	for _, window := range []int{1, 7, 64, 2*len(line) + 2} {
		for _, nl := range []bool{false, true} {
			in := line
			if nl {
				in = append(append([]byte(nil), line...), '\n', 'x')
			}
			br := bufio.NewReaderSize(bytes.NewReader(in), 16)
			var r captureRecord
			ok, complete := newLineDecoder().decodeStream(br, window, &r)
			if ok && (!lineOK || !reflect.DeepEqual(r, want)) {
				g, _ := json.Marshal(r)
				w, _ := json.Marshal(want)
				t.Fatalf("window %d on %q: took it as\n%s\ndecodeLine: %v\n%s", window, line, g, lineOK, w)
			}
			if ok && complete != nl {
				t.Fatalf("window %d on %q: complete %v, want %v", window, line, complete, nl)
			}
			if window > 2*len(line) && ok != lineOK {
				t.Fatalf("window %d on %q: took it %v, decodeLine %v", window, line, ok, lineOK)
			}
			if ok && nl {
				if rest, _ := br.ReadString(0); rest != "x" {
					t.Fatalf("window %d on %q: left %q after the line, want \"x\"", window, line, rest)
				}
			}
		}
	}
}

func TestLineDecoderMatchesJSON(t *testing.T) {
	fastOK := 0
	for _, l := range captureLines {
		checkLine(t, []byte(l))
		var r captureRecord
		if newLineDecoder().decodeLine([]byte(l), &r) {
			fastOK++
		}
	}
	if fastOK < 11 {
		t.Errorf("fast path took %d of the lines, want at least the 11 in CaptureWriter's form", fastOK)
	}
	// Every line of a written capture but the header takes the fast
	// path.
	var b bytes.Buffer
	if err := writeCapture(&b, synthCapture(200, 1000, 4)); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte("\n"))
	for i, l := range lines {
		checkLine(t, l)
		var r captureRecord
		if ok := newLineDecoder().decodeLine(l, &r); ok != (i > 0) {
			t.Errorf("line %d: fast path %v: %.80s", i+1, ok, l)
		}
	}
}

func FuzzCaptureLine(f *testing.F) {
	for _, l := range captureLines {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkLine(t, line)
	})
}
