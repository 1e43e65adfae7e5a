package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
)

func TestJSONRoundTrip(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := analyze.Rank(loadCapture(t, tc.capture), tc.opts)
			var buf bytes.Buffer
			if err := JSON(&buf, r); err != nil {
				t.Fatal(err)
			}
			got, err := ParseJSON(&buf)
			if err != nil {
				t.Fatal(err)
			}
			want := toV1(r)
			if !got.StartedAt.Equal(want.StartedAt) {
				t.Errorf("StartedAt = %v, want %v", got.StartedAt, want.StartedAt)
			}
			// time.Time keeps its location by pointer; compare the rest.
			got.StartedAt = want.StartedAt
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip changed the report:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestJSONNeverNull(t *testing.T) {
	r := analyze.Rank(&analyze.Capture{Sites: []analyze.Site{{ID: 1, LiveCount: 1, LiveBytes: 8}}}, analyze.Options{})
	var buf bytes.Buffer
	if err := JSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"command": []`, `"warnings": []`, `"frames": []`, `"exit_code": null`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %s:\n%s", want, buf.String())
		}
	}
	if strings.Contains(buf.String(), `"truncated"`) {
		t.Errorf("report has truncated for a complete stack:\n%s", buf.String())
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, "parse report: unexpected end of JSON input"},
		{"null", `null`, `parse report: schema "", want leakscope.report/v1`},
		{"other schema", `{"schema":"leakscope.report/v2"}`, `parse report: schema "leakscope.report/v2", want leakscope.report/v1`},
		{"wrong type", `{"schema":"leakscope.report/v1","leaks":{}}`, "parse report: json: cannot unmarshal object"},
		{"trailing data", `{"schema":"leakscope.report/v1"} {}`, "parse report: invalid character '{' after top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ParseJSON(strings.NewReader(tt.in))
			if v != nil || err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("ParseJSON(%q) = %v, %v; want nil, %s…", tt.in, v, err, tt.want)
			}
		})
	}
}

func TestParseJSONIgnoresNewFields(t *testing.T) {
	v, err := ParseJSON(strings.NewReader(`{"schema":"leakscope.report/v1","added_later":1,"target":{"pid":7,"cgroup":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Target.Pid != 7 {
		t.Errorf("Target.Pid = %d, want 7", v.Target.Pid)
	}
}

// FuzzParseJSON checks that ParseJSON returns a report exactly when it
// returns no error, that the report has the v1 schema, and that it survives
// being written and read again.
func FuzzParseJSON(f *testing.F) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.json.golden"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range goldens {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"schema":"leakscope.report/v1"}`))
	f.Add([]byte(`{"schema":"leakscope.report/v2"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(bytes.NewReader(data))
		if (err == nil) != (v != nil) {
			t.Fatalf("ParseJSON = %v, %v: want exactly one of report and error", v, err)
		}
		if err != nil {
			return
		}
		if v.Schema != SchemaV1 {
			t.Fatalf("Schema = %q, want %q", v.Schema, SchemaV1)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal parsed report: %v", err)
		}
		if _, err := ParseJSON(bytes.NewReader(again)); err != nil {
			t.Fatalf("reparse %s: %v", again, err)
		}
	})
}
