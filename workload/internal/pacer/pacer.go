// Package pacer generates open-loop Poisson send schedules. Arrivals carry a
// clump of C requests sent at the same instant, and arrive at rate R/C, so the
// mean request rate stays R while the load becomes burstier as C grows.
package pacer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Arrival is one instant of the schedule: Count requests due At (an offset
// from the start of the stream).
type Arrival struct {
	At    time.Duration
	Count int
}

// Schedule yields the arrivals of one stream in order. It is deterministic
// for a given seed and stream number, so runs can be repeated exactly.
type Schedule struct {
	meanGapSeconds float64
	clump          int
	rng            *rand.Rand
	at             float64 // seconds since start of the last arrival
}

// New returns a schedule of rate requests per second in clumps of clump.
// stream separates independent schedules drawn from one seed.
func New(rate float64, clump int, seed, stream uint64) (*Schedule, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("rate must be a positive number, got %v", rate)
	}
	if clump < 1 {
		return nil, fmt.Errorf("clump must be at least 1, got %d", clump)
	}
	return &Schedule{
		meanGapSeconds: float64(clump) / rate,
		clump:          clump,
		rng:            rand.New(rand.NewPCG(seed, stream)),
	}, nil
}

// Next returns the next arrival. Gaps between arrivals are exponential with
// mean clump/rate; times are accumulated in float seconds so rounding to
// nanoseconds never drifts the rate.
func (s *Schedule) Next() Arrival {
	s.at += s.rng.ExpFloat64() * s.meanGapSeconds
	return Arrival{At: time.Duration(s.at * float64(time.Second)), Count: s.clump}
}
