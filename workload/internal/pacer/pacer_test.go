package pacer

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

func TestNewRejectsBadArguments(t *testing.T) {
	tests := []struct {
		rate  float64
		clump int
	}{{0, 1}, {-5, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {10, 0}, {10, -2}}
	for _, tt := range tests {
		if _, err := New(tt.rate, tt.clump, 1, 1); err == nil {
			t.Errorf("New(%v, %d): want error", tt.rate, tt.clump)
		}
	}
}

func TestScheduleIsDeterministicPerSeedAndStream(t *testing.T) {
	first := take(t, 1000, 1, 7, 1, 50)
	again := take(t, 1000, 1, 7, 1, 50)
	otherSeed := take(t, 1000, 1, 8, 1, 50)
	otherStream := take(t, 1000, 1, 7, 2, 50)
	for i := range first {
		if first[i] != again[i] {
			t.Fatalf("arrival %d differs between identical schedules", i)
		}
	}
	if first[0] == otherSeed[0] && first[1] == otherSeed[1] {
		t.Error("different seeds gave the same schedule")
	}
	if first[0] == otherStream[0] && first[1] == otherStream[1] {
		t.Error("different streams gave the same schedule")
	}
}

func TestGapsArePoisson(t *testing.T) {
	const rate, n = 1000.0, 200000
	arrivals := take(t, rate, 1, 42, 1, n)
	var sum, sumSq float64
	longer := 0
	prev := time.Duration(0)
	for i, a := range arrivals {
		if a.At < prev {
			t.Fatalf("arrival %d goes back in time", i)
		}
		gap := (a.At - prev).Seconds()
		prev = a.At
		sum += gap
		sumSq += gap * gap
		if gap > 1/rate {
			longer++
		}
	}
	mean := sum / n
	sd := math.Sqrt(sumSq/n - mean*mean)
	// Exponential gaps: mean 1/rate, coefficient of variation 1, and
	// P(gap > mean) = 1/e. Tolerances are ~5 standard errors at n = 200000.
	within(t, "mean gap", mean, 1/rate, 0.012)
	within(t, "coefficient of variation", sd/mean, 1, 0.02)
	within(t, "P(gap > mean)", float64(longer)/n, 1/math.E, 0.02)
}

func TestClumpingKeepsTheMeanRate(t *testing.T) {
	const rate, horizon = 100.0, 20000 * time.Second
	for _, clump := range []int{1, 5, 50} {
		s, err := New(rate, clump, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		requests, arrivals := 0, 0
		for a := s.Next(); a.At < horizon; a = s.Next() {
			if a.Count != clump {
				t.Fatalf("clump %d: arrival carries %d requests", clump, a.Count)
			}
			requests += a.Count
			arrivals++
		}
		// sd of the request count is sqrt(rate*clump*T): 0.5% of the mean
		// at clump 50, so 2% is four standard deviations.
		within(t, "request rate", float64(requests)/horizon.Seconds(), rate, 0.02)
		within(t, "arrival rate", float64(arrivals)/horizon.Seconds(), rate/float64(clump), 0.02)
	}
}

func take(t *testing.T, rate float64, clump int, seed, stream uint64, n int) []Arrival {
	t.Helper()
	s, err := New(rate, clump, seed, stream)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Arrival, n)
	for i := range out {
		out[i] = s.Next()
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
