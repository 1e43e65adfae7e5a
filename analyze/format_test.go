package analyze

import (
	"math"
	"testing"
	"time"
)

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1048575, "1.0 MiB"},
		{4 << 20, "4.0 MiB"},
		{3 << 30, "3.0 GiB"},
		{math.MaxUint64, "16.0 EiB"},
	}
	for _, tt := range tests {
		if got := FormatBytes(tt.n); got != tt.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{250 * time.Millisecond, "250ms"},
		{1234 * time.Millisecond, "1.2s"},
		{59 * time.Second, "59s"},
		{9*time.Minute + 12*time.Second + 400*time.Millisecond, "9m12s"},
		{10 * time.Minute, "10m0s"},
		{2*time.Hour + 5*time.Minute + 10*time.Second, "2h5m"},
		{50 * time.Hour, "50h0m"},
		{-90 * time.Second, "-1m30s"},
		{math.MinInt64, time.Duration(math.MinInt64).String()},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.d); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
