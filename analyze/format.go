package analyze

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// FormatBytes renders a byte count for humans with 1024-based units:
// "512 B", "1.5 KiB", "4.0 MiB". Values of a KiB or more keep one decimal.
// Reasons use it, and report reuses it so both say the same thing.
func FormatBytes(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	const units = "KMGTPE"
	v := float64(n) / 1024
	i := 0
	// Compare after rounding to one decimal, so 1048575 becomes "1.0 MiB"
	// rather than "1024.0 KiB".
	for i < len(units)-1 && math.Round(v*10)/10 >= 1024 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}

// FormatDuration renders a duration for humans at a precision that suits
// its size: "250ms", "12.3s", "9m12s", "2h5m". Hours are the largest unit.
func FormatDuration(d time.Duration) string {
	switch {
	case d == math.MinInt64:
		return d.String() // -d would overflow
	case d < 0:
		return "-" + FormatDuration(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
}
