package testutil

import (
	"bytes"
	"os"
	"testing"

	"github.com/leakscope/leakscope/analyze"
)

// SaveCapture writes c to path as a capture file, as --save writes one:
// the header, each snapshot with the sites defined so far, and the end.
func SaveCapture(t testing.TB, path string, c *analyze.Capture) string {
	t.Helper()
	var b bytes.Buffer
	cw, err := analyze.NewCaptureWriter(&b, c)
	for i := 0; err == nil && i < len(c.Snapshots); i++ {
		err = cw.WriteSnapshotOf(analyze.Sites(c.Sites), c.Snapshots[i])
	}
	if err == nil {
		err = cw.Close(c)
	}
	if err == nil {
		err = os.WriteFile(path, b.Bytes(), 0o600)
	}
	if err != nil {
		t.Fatalf("save capture %s: %v", path, err)
	}
	return path
}
