package report

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

func TestJSONRoundTrip(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r := analyze.Rank(tc.load(t), tc.opts)
			var buf bytes.Buffer
			if err := JSON(&buf, r); err != nil {
				t.Fatal(err)
			}
			got := new(V1)
			if err := testutil.DecodeJSON(&buf, SchemaV1, got); err != nil {
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
