package analyze

import (
	"math"
	"testing"
)

func TestSampleWeight(t *testing.T) {
	for _, tc := range []struct {
		size, mean uint64
		want       float64
	}{
		{4096, 4096, 1 / (1 - math.Exp(-1))},
		{1 << 20, 4096, 1},
		{64, 512 << 10, (512 << 10) / 64.0},
	} {
		if got := SampleWeight(tc.size, tc.mean); math.Abs(got-tc.want) > tc.want*0.001 {
			t.Errorf("SampleWeight(%d, %d) = %v, want %v", tc.size, tc.mean, got, tc.want)
		}
	}
}
