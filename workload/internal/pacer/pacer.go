// Package pacer generates open-loop send schedules: a Poisson process
// conditioned on its count in each span. Arrivals carry a clump of C
// requests sent at the same instant and come at rate R/C, so the mean
// request rate stays R while the load becomes burstier as C grows.
//
// A schedule has two spans, the warm-up [0, warmup) and the window
// [warmup, warmup+window). Each span holds exactly
// n = round(R x span / C) arrivals (half away from zero), placed as the
// order statistics of n independent uniform times over the span. That is
// exactly the law of a Poisson process's points in the span given that
// there are n of them, so inside the window the gaps between arrivals are
// still those of a Poisson process (exponential, coefficient of variation
// 1), only the count no longer varies from run to run.
//
// Why: a plain Poisson process puts Poisson(R x span / C) arrivals in a
// window, which for short windows varies a lot (3 s at 20 req/s in clumps of
// 10 is Poisson(6) clumps, fewer than the 4 that p90 needs in 15% of runs; a
// quick profile's service runs held 10 to 130 requests), so a run's load differs from
// its design and its latency quantiles are at times not computable (p90
// needs 36 requests). Conditioning on the count gives every run the
// requests its quantiles need and the same offered load.
package pacer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// maxArrivals bounds the arrivals of one span, so counts are exact
// integers in float64 and converting them to int is well defined.
const maxArrivals = 1 << 53

// Arrival is one instant of the schedule: Count requests due At (an offset
// from the start of the stream).
type Arrival struct {
	At    time.Duration
	Count int
}

// span is one stretch of the schedule and the number of arrivals in it.
type span struct {
	start, end time.Duration
	arrivals   int
}

// Schedule yields the arrivals of one stream in order: the warm-up's, then
// the window's. It is deterministic for a given seed and stream number, so
// runs can be repeated exactly.
type Schedule struct {
	clump int
	rng   *rand.Rand
	spans [2]span // warm-up, window
	cur   int     // index of the span being generated
	left  int     // arrivals still to place in spans[cur]
	pos   float64 // nanoseconds since spans[cur].start of the last arrival
}

// New returns the schedule of a stream of rate requests per second in
// clumps of clump, with a warm-up of warmup (0 for none) followed by a
// measured window of window. stream separates independent schedules drawn
// from one seed.
func New(rate float64, clump int, warmup, window time.Duration, seed, stream uint64) (*Schedule, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("rate must be a positive number, got %v", rate)
	}
	if clump < 1 {
		return nil, fmt.Errorf("clump must be at least 1, got %d", clump)
	}
	if warmup < 0 {
		return nil, fmt.Errorf("warmup must be 0 or positive, got %v", warmup)
	}
	if window <= 0 {
		return nil, fmt.Errorf("window must be positive, got %v", window)
	}
	if warmup > math.MaxInt64-window {
		return nil, fmt.Errorf("warmup %v + window %v overflows a time.Duration", warmup, window)
	}
	s := &Schedule{clump: clump, rng: rand.New(rand.NewPCG(seed, stream))}
	for i, sp := range []span{{0, warmup, 0}, {warmup, warmup + window, 0}} {
		n, err := spanArrivals(rate, clump, sp.end-sp.start)
		if err != nil {
			return nil, err
		}
		sp.arrivals = n
		s.spans[i] = sp
	}
	s.left = s.spans[0].arrivals
	return s, nil
}

// spanArrivals is round(rate x span / clump), half away from zero, computed
// as throttlelab.model.quantities.span_arrivals does (span in milliseconds),
// so the Python side predicts the same count.
func spanArrivals(rate float64, clump int, d time.Duration) (int, error) {
	ms := float64(d) / float64(time.Millisecond)
	n := math.Floor(rate*ms/1000/float64(clump) + 0.5)
	if !(n <= maxArrivals) {
		return 0, fmt.Errorf("rate %v in clumps of %d over %v makes %.3g arrivals, more than %d",
			rate, clump, d, rate*ms/1000/float64(clump), int64(maxArrivals))
	}
	return int(n), nil
}

// WarmupArrivals is the number of arrivals in the warm-up.
func (s *Schedule) WarmupArrivals() int { return s.spans[0].arrivals }

// WindowArrivals is the number of arrivals in the window; the window holds
// WindowArrivals() x clump requests.
func (s *Schedule) WindowArrivals() int { return s.spans[1].arrivals }

// Len is the total number of arrivals, warm-up and window.
func (s *Schedule) Len() int { return s.spans[0].arrivals + s.spans[1].arrivals }

// Next returns the next arrival, or false once all Len() were returned.
//
// The points of a span are drawn in order, one at a time: with k points
// left to place uniformly in (x, end), the next one is their minimum,
// x + (end-x) x (1 - U^(1/k)) with U uniform (Bentley & Saxe, "Generating
// sorted lists of random numbers", 1980). 1 - U^(1/k) is computed as
// -expm1(-E/k) with E = -ln U exponential, exact even for large k. This
// gives the order statistics of independent uniforms without storing them.
// Positions are kept as float nanoseconds from the span's start and
// truncated to whole nanoseconds, at most end-1 ns, so every arrival stays
// inside its span.
func (s *Schedule) Next() (Arrival, bool) {
	for s.left == 0 {
		if s.cur == len(s.spans)-1 {
			return Arrival{}, false
		}
		s.cur++
		s.left, s.pos = s.spans[s.cur].arrivals, 0
	}
	sp := s.spans[s.cur]
	length := float64(sp.end - sp.start)
	s.pos += (length - s.pos) * -math.Expm1(-s.rng.ExpFloat64()/float64(s.left))
	s.left--
	at := sp.start + min(time.Duration(s.pos), sp.end-sp.start-1)
	return Arrival{At: at, Count: s.clump}, true
}
