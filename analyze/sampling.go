package analyze

import "math"

// SampleWeight is how many allocations of size bytes one traced allocation
// stands for when sampling every mean bytes: the inverse of its chance to
// be traced, 1 - exp(-size/mean). The tracer weighs each live allocation
// by it at the end of a capture (1 for one of the exact budget), and each
// snapshot of a sampled site's totals, all an agent reads, by the site's
// mean size.
func SampleWeight(size, mean uint64) float64 {
	if mean == 0 {
		return 1
	}
	p := -math.Expm1(-float64(size) / float64(mean))
	if p <= 0 {
		return float64(mean) // a 0-byte allocation: one per gap
	}
	return 1 / p
}
