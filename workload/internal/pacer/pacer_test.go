package pacer

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewRejectsBadArguments(t *testing.T) {
	tests := []struct {
		rate           float64
		clump          int
		warmup, window time.Duration
		want           string // in the error
	}{
		{0, 1, 0, time.Second, "rate"},
		{-5, 1, 0, time.Second, "rate"},
		{math.NaN(), 1, 0, time.Second, "rate"},
		{math.Inf(1), 1, 0, time.Second, "rate"},
		{10, 0, 0, time.Second, "clump"},
		{10, -2, 0, time.Second, "clump"},
		{10, 1, -time.Nanosecond, time.Second, "warmup"},
		{10, 1, 0, 0, "window"},
		{10, 1, time.Second, -time.Second, "window"},
		{10, 1, math.MaxInt64 - time.Second, 2 * time.Second, "overflows"},
		{1e300, 1, 0, time.Second, "arrivals"},
		{1e300, 1, time.Second, time.Second, "arrivals"},
	}
	for _, tt := range tests {
		_, err := New(tt.rate, tt.clump, tt.warmup, tt.window, 1, 1)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%v, %d, %v, %v): error %v, want one about %s",
				tt.rate, tt.clump, tt.warmup, tt.window, err, tt.want)
		}
	}
	if _, err := New(10, 1, 0, time.Second, 1, 1); err != nil {
		t.Errorf("no warm-up: %v", err)
	}
}

func TestScheduleIsDeterministicPerSeedAndStream(t *testing.T) {
	const warmup, window = time.Second, 10 * time.Second
	first := all(t, 100, 1, warmup, window, 7, 1)
	again := all(t, 100, 1, warmup, window, 7, 1)
	if !slices.Equal(first, again) {
		t.Fatal("identical arguments gave different schedules")
	}
	if len(first) != 1100 {
		t.Fatalf("%d arrivals, want 1100", len(first))
	}
	for _, other := range []struct {
		what         string
		seed, stream uint64
	}{{"seeds", 8, 1}, {"streams", 7, 2}} {
		differ := 0
		for i, a := range all(t, 100, 1, warmup, window, other.seed, other.stream) {
			if a != first[i] {
				differ++
			}
		}
		if differ < len(first)*9/10 {
			t.Errorf("different %s: only %d of %d arrivals differ", other.what, differ, len(first))
		}
	}
}

func TestEachSpanHoldsExactlyItsCount(t *testing.T) {
	tests := []struct {
		rate           float64
		clump          int
		warmup, window time.Duration
		nWarmup, n     int
	}{
		{20, 10, time.Second, 3 * time.Second, 2, 6}, // the short runs that motivated the count
		{5, 1, time.Second, 3 * time.Second, 5, 15},  // a ping stream
		{7, 2, 0, time.Second, 0, 4},                 // 3.5 rounds up, no warm-up
		{5, 2, time.Second, time.Second, 3, 3},       // 2.5 rounds up
		{0.4, 1, time.Second, time.Second, 0, 0},     // 0.4 rounds to nothing
		{1000, 3, 1500 * time.Millisecond, 2 * time.Second, 500, 667},
		{3, 1, time.Millisecond, time.Nanosecond, 0, 0}, // tiny spans
		{4e9, 1, 0, time.Nanosecond, 0, 4},              // more arrivals than nanoseconds
	}
	for _, tt := range tests {
		for seed := range uint64(200) {
			s, err := New(tt.rate, tt.clump, tt.warmup, tt.window, seed, 1)
			if err != nil {
				t.Fatal(err)
			}
			if s.WarmupArrivals() != tt.nWarmup || s.WindowArrivals() != tt.n || s.Len() != tt.nWarmup+tt.n {
				t.Fatalf("%+v: counts %d + %d = %d", tt, s.WarmupArrivals(), s.WindowArrivals(), s.Len())
			}
			end := tt.warmup + tt.window
			inWarmup, inWindow := 0, 0
			prev := time.Duration(0)
			for i := 0; ; i++ {
				a, ok := s.Next()
				if !ok {
					break
				}
				if a.Count != tt.clump {
					t.Fatalf("%+v: arrival %d carries %d requests", tt, i, a.Count)
				}
				if a.At < prev {
					t.Fatalf("%+v seed %d: arrival %d at %v goes back from %v", tt, seed, i, a.At, prev)
				}
				prev = a.At
				switch {
				case a.At >= 0 && a.At < tt.warmup:
					inWarmup++
				case a.At >= tt.warmup && a.At < end:
					inWindow++
				default:
					t.Fatalf("%+v seed %d: arrival %d at %v is outside [0, %v)", tt, seed, i, a.At, end)
				}
			}
			if inWarmup != tt.nWarmup || inWindow != tt.n {
				t.Fatalf("%+v seed %d: %d arrivals in the warm-up and %d in the window",
					tt, seed, inWarmup, inWindow)
			}
			for range 3 {
				if a, ok := s.Next(); ok {
					t.Fatalf("%+v: arrival %v after the last", tt, a)
				}
			}
		}
	}
}

func TestGapsInsideTheWindowArePoisson(t *testing.T) {
	const rate, n = 1000.0, 200000
	const warmup, window = 5 * time.Second, 200 * time.Second
	arrivals := all(t, rate, 1, warmup, window, 42, 1)[int(rate*warmup.Seconds()):]
	if len(arrivals) != n {
		t.Fatalf("%d arrivals in the window, want %d", len(arrivals), n)
	}
	// The n-1 gaps between the window's arrivals (the first and last gap
	// touch the window's edges).
	gaps := make([]float64, 0, n-1)
	var sum, sumSq float64
	for i := 1; i < n; i++ {
		gap := (arrivals[i].At - arrivals[i-1].At).Seconds()
		gaps = append(gaps, gap)
		sum += gap
		sumSq += gap * gap
	}
	m := float64(len(gaps))
	mean := sum / m
	sd := math.Sqrt(sumSq/m - mean*mean)
	// Exponential gaps of mean span/(n+1): coefficient of variation 1 (its
	// standard error is sqrt(2/n) = 0.0032) and P(gap > t x mean) = e^-t.
	// Tolerances are 5 standard errors.
	wantMean := window.Seconds() / (n + 1)
	within(t, "mean gap", mean, wantMean, 0.001)
	within(t, "coefficient of variation", sd/mean, 1, 0.016)
	for _, x := range []float64{0.1, 0.5, 1, 2, 4} {
		longer := 0
		for _, g := range gaps {
			if g > x*wantMean {
				longer++
			}
		}
		p := math.Exp(-x)
		se := math.Sqrt(p * (1 - p) / m)
		if got := float64(longer) / m; math.Abs(got-p) > 5*se {
			t.Errorf("P(gap > %g mean) = %.5f, want %.5f ± %.5f", x, got, p, 5*se)
		}
	}
}

// Across seeds, the window's points are independent uniforms: each falls in
// the first half with probability 1/2 (so the count there is Binomial(n,
// 1/2), mean n/2, variance n/4), and the k-th of n has mean k/(n+1).
func TestWindowPointsAreUniformOrderStatistics(t *testing.T) {
	const runs, nWarmup, n = 20000, 2, 6
	const warmup, window = time.Second, 3 * time.Second
	var firstHalf, firstHalfSq float64
	var kth [n]float64
	for seed := range uint64(runs) {
		arrivals := all(t, 20, 10, warmup, window, seed, 1)
		if len(arrivals) != nWarmup+n {
			t.Fatalf("seed %d: %d arrivals", seed, len(arrivals))
		}
		c := 0.0
		for k, a := range arrivals[nWarmup:] {
			u := (a.At - warmup).Seconds() / window.Seconds()
			kth[k] += u
			if u < 0.5 {
				c++
			}
		}
		firstHalf += c
		firstHalfSq += c * c
	}
	mean := firstHalf / runs
	variance := firstHalfSq/runs - mean*mean
	// Standard errors: sqrt(n/4/runs) = 0.0087 for the mean count; about
	// sqrt((mu4 - sigma^4)/runs) = sqrt((6 - 2.25)/runs) = 0.0137 for its
	// variance.
	if math.Abs(mean/n-0.5) > 5*math.Sqrt(0.25/(n*runs)) {
		t.Errorf("fraction in the first half %.4f, want 0.5", mean/n)
	}
	if math.Abs(variance-n/4.0) > 5*0.0137 {
		t.Errorf("variance of the count in the first half %.4f, want %.4f", variance, n/4.0)
	}
	for k := range n {
		want := float64(k+1) / (n + 1)
		// Var of the k-th of n uniforms: k(n-k+1)/((n+1)^2 (n+2)).
		kk := float64(k + 1)
		se := math.Sqrt(kk * (n - kk + 1) / ((n + 1) * (n + 1) * (n + 2)) / runs)
		if got := kth[k] / runs; math.Abs(got-want) > 5*se {
			t.Errorf("mean position of arrival %d of %d = %.4f, want %.4f ± %.4f", k+1, n, got, want, 5*se)
		}
	}
}

// all returns every arrival of a schedule.
func all(t *testing.T, rate float64, clump int, warmup, window time.Duration, seed, stream uint64) []Arrival {
	t.Helper()
	s, err := New(rate, clump, warmup, window, seed, stream)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Arrival, 0, s.Len())
	for a, ok := s.Next(); ok; a, ok = s.Next() {
		out = append(out, a)
	}
	return out
}

func within(t *testing.T, what string, got, want, relTol float64) {
	t.Helper()
	if math.Abs(got-want) > relTol*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g ± %.1f%%", what, got, want, relTol*100)
	}
}

func TestSleepUntilWakesOnTimeAndHonoursCancel(t *testing.T) {
	done := make(chan []time.Duration)
	go func() {
		// Returns without unlocking on purpose (see LockForPreciseSleep).
		if err := LockForPreciseSleep(); err != nil {
			t.Error(err)
		}
		var late []time.Duration
		for i := 0; i < 20; i++ {
			due := time.Now().Add(700 * time.Microsecond)
			if err := SleepUntil(context.Background(), due); err != nil {
				t.Error(err)
			}
			late = append(late, time.Since(due))
		}
		done <- late
	}()
	late := <-done
	slices.Sort(late)
	if late[0] < 0 {
		t.Errorf("woke %v early", -late[0])
	}
	if median := late[len(late)/2]; median > 500*time.Microsecond {
		t.Errorf("median lateness %v", median)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := SleepUntil(ctx, time.Now().Add(time.Hour)); err == nil {
		t.Error("SleepUntil ignored a cancelled context")
	}
}
