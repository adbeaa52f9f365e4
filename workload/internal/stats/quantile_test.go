package stats

import (
	"math"
	"slices"
	"testing"
)

// Expected values pinned from numpy.quantile(x, q) (method "linear").
func TestQuantileMatchesNumpyLinear(t *testing.T) {
	odd := []float64{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}
	two := []float64{7.5, 2.5}
	tests := []struct {
		name string
		x    []float64
		q    float64
		want float64
	}{
		{"min", odd, 0, 1},
		{"p10", odd, 0.1, 1},
		{"p25", odd, 0.25, 2.5},
		{"median", odd, 0.5, 4},
		{"p90", odd, 0.9, 6},
		{"p99", odd, 0.99, 8.7},
		{"p999", odd, 0.999, 8.97},
		{"max", odd, 1, 9},
		{"two p0", two, 0, 2.5},
		{"two p30", two, 0.3, 4},
		{"two median", two, 0.5, 5},
		{"two max", two, 1, 7.5},
		{"single", []float64{42}, 0.99, 42},
		{"q above 1 clamps", odd, 1.5, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sorted := slices.Clone(tt.x)
			slices.Sort(sorted)
			if got := Quantile(sorted, tt.q); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Quantile(q=%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func TestQuantileOfNothingIsNaN(t *testing.T) {
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("want NaN")
	}
	if s := Summarize(nil); !math.IsNaN(s.P50) || !math.IsNaN(s.Max) {
		t.Errorf("Summarize(nil) = %+v", s)
	}
}

func TestSummarizeLeavesInputUnsorted(t *testing.T) {
	x := []float64{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}
	s := Summarize(x)
	if x[0] != 3 {
		t.Error("Summarize sorted its input in place")
	}
	want := Summary{P50: 4, P90: 6, P99: 8.7, P999: 8.97, Max: 9}
	for _, c := range []struct{ got, want float64 }{
		{s.P50, want.P50}, {s.P90, want.P90}, {s.P99, want.P99}, {s.P999, want.P999}, {s.Max, want.Max},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("summary %+v, want %+v", s, want)
		}
	}
}
