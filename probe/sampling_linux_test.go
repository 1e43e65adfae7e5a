//go:build linux && amd64

package probe

import (
	"testing"

	"github.com/leakscope/leakscope/analyze"
	"github.com/leakscope/leakscope/internal/testutil"
)

// Sampled by bytes, the large leak is still found at rank 1, estimated
// close to its 100 blocks of 4096 bytes; nothing else of the churn
// (200000 messages) outranks it, and frees of untraced blocks are no loss.
func TestLaunchSampled(t *testing.T) {
	testutil.RequireBPF(t)
	bin := buildExample(t, "leaky", true)
	c, _ := launchWith(t, Options{SampleBytes: 4096}, bin)
	if c.SampleBytes != 4096 {
		t.Errorf("capture SampleBytes = %d", c.SampleBytes)
	}
	if c.Lost.UnknownFrees != 0 || c.Lost.AllocationsDropped != 0 {
		t.Errorf("lost = %+v", c.Lost)
	}
	res := analyze.Rank(c, analyze.Options{})
	if len(res.Leaks) == 0 {
		t.Fatal("no leaks")
	}
	l := res.Leaks[0]
	// Each 4096-byte block is traced with probability 1-1/e (63%): 100
	// blocks give 63 +- 5 traced (one sigma), each standing for 1.58.
	if fn := l.Site.Stack.Frames[0].Function; fn != "leak_request_buffer" || l.Count < 70 || l.Count > 130 ||
		l.Bytes < 70*4096 || l.Bytes > 130*4096 {
		t.Errorf("rank 1 = %s, %d blocks, %d bytes; want leak_request_buffer, 100 +- 30 blocks of 4096 bytes", fn, l.Count, l.Bytes)
	}
}
