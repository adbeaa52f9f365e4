// Package stats computes the latency summaries cpulab writes. Quantiles are
// Hyndman & Fan type 7 (linear interpolation between order statistics),
// numpy's default, so Go summaries and the Python analysis agree.
package stats

import (
	"math"
	"slices"
)

// Quantile returns the type-7 q-quantile of sorted (ascending), or NaN for
// no samples. q is clamped to [0, 1].
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	q = math.Min(1, math.Max(0, q))
	h := float64(n-1) * q
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Summary is the latency summary of one endpoint, in the unit of the samples.
type Summary struct {
	P50, P90, P99, P999, Max float64
}

// Summarize sorts a copy of samples and returns its summary; all fields are
// NaN when there are no samples.
func Summarize(samples []float64) Summary {
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	s := Summary{
		P50: Quantile(sorted, 0.50), P90: Quantile(sorted, 0.90),
		P99: Quantile(sorted, 0.99), P999: Quantile(sorted, 0.999),
		Max: math.NaN(),
	}
	if len(sorted) > 0 {
		s.Max = sorted[len(sorted)-1]
	}
	return s
}
