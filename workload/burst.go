package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	"cpulab/internal/cgroup"
	"cpulab/internal/pacer"
	"cpulab/internal/record"
	"cpulab/internal/stats"
	"cpulab/internal/threadcpu"
)

type burstOptions struct {
	threads  int
	work     time.Duration
	interval time.Duration
	rounds   int
	// align: round 0 starts on the next multiple of interval since the Unix epoch, plus offset,
	// so that processes started apart (X4's pods) burst together, or exactly offset apart.
	align  bool
	offset time.Duration
	// spread: burner thread i runs only on the i-th (mod their number) of the CPUs the process may run on,
	// so that threads up to the CPUs' number are certain to burn on as many run queues.
	spread bool
}

type roundRecord struct {
	Type        string  `json:"type"`
	Round       int     `json:"round"`
	TS          float64 `json:"t_s"`
	WallMs      float64 `json:"wall_ms"`
	ThreadCPUMs float64 `json:"thread_cpu_ms"`
	// ThreadCPUs: how many distinct CPUs the threads mainly ran on (each thread's CPU at most of its
	// getcpu readings during the burn): the run queues the round's threads were spread over.
	ThreadCPUs int `json:"thread_cpus"`
	cgroup.DeltaTotals
	// The kernel counts a burst at the period boundary after it, usually after this
	// round's second reading: per-round values are mostly 0; the summary has them all.
	cgroup.DeltaBursts
}

type burstSummary struct {
	Type      string   `json:"type"`
	Rounds    int      `json:"rounds"`
	P50WallMs *float64 `json:"p50_wall_ms"`
	MaxWallMs *float64 `json:"max_wall_ms"`
	AvgCores  *float64 `json:"avg_cores"`
	cgroup.Counters
	ElapsedS float64 `json:"elapsed_s"`
}

func runBurst(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o burstOptions
	fs := newFlagSet("burst", "Every -interval, -threads threads each burn -work of thread CPU time at once;\n"+
		"one record per round with its wall time and cgroup counter deltas.", stderr)
	fs.IntVar(&o.threads, "threads", 8, "threads burning at once")
	fs.DurationVar(&o.work, "work", 20*time.Millisecond, "thread CPU time each thread burns per round")
	fs.DurationVar(&o.interval, "interval", time.Second, "time from one round's start to the next")
	fs.IntVar(&o.rounds, "rounds", 20, "number of rounds")
	fs.BoolVar(&o.align, "align", false, "start round 0 on the next multiple of -interval since the Unix epoch (+ -offset)")
	fs.DurationVar(&o.offset, "offset", 0, "with -align: start that much after the grid point")
	fs.BoolVar(&o.spread, "spread", false, "pin burner thread i to the i-th (mod their number) of the CPUs the process may run on")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(atLeast("threads", o.threads, 1), positiveDuration("work", o.work),
		positiveDuration("interval", o.interval), atLeast("rounds", o.rounds, 1),
		offsetWithin(o.offset, o.interval)); err != nil {
		return err
	}
	out := record.NewWriter(stdout, true)
	if err := out.Write(record.NewHeader(buildInfo(), "burst", fs)); err != nil {
		return err
	}
	summary, err := burst(ctx, o, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "burst: %d rounds, p50 wall %s ms, max %s ms, throttled %s periods of %s\n",
		summary.Rounds, fmtMs(summary.P50WallMs), fmtMs(summary.MaxWallMs), orNull(summary.NrThrottled), orNull(summary.NrPeriods))
	return nil
}

// burst runs the rounds (fewer if ctx ends) and writes their records and
// the summary. Round i starts at start + i*interval, or at once if the
// previous round overran; the run lasts until the last interval is over.
func burst(ctx context.Context, o burstOptions, out *record.Writer) (burstSummary, error) {
	var cpus []int
	if o.spread {
		allowed, err := threadcpu.Allowed()
		if err != nil {
			return burstSummary{}, err
		}
		cpus = allowed
	}
	pool, err := newBurnerPool(o.threads, cpus)
	if err != nil {
		return burstSummary{}, err
	}
	defer pool.close()

	start := time.Now()
	if o.align {
		start = alignedStart(start, o.interval, o.offset)
		if pacer.WaitUntil(ctx, start) != nil {
			return burstSummary{}, ctx.Err()
		}
	}
	first := cgroup.Read().Counters
	var walls []float64
	for round := 0; round < o.rounds; round++ {
		if pacer.WaitUntil(ctx, start.Add(time.Duration(round)*o.interval)) != nil {
			break
		}
		before := cgroup.Read().Counters
		began := time.Now()
		used, cpus, err := pool.burnAll(o.work)
		if err != nil {
			return burstSummary{}, err
		}
		wall := time.Since(began)
		delta := cgroup.Read().Counters.Sub(before)
		rec := roundRecord{
			Type: "round", Round: round, TS: began.Sub(start).Seconds(),
			WallMs: record.Ms(msOf(wall)), ThreadCPUMs: record.Ms(msOf(used)), ThreadCPUs: cpus,
			DeltaTotals: delta.AsDeltaTotals(), DeltaBursts: delta.AsDeltaBursts(),
		}
		if err := out.Write(rec); err != nil {
			return burstSummary{}, err
		}
		walls = append(walls, rec.WallMs) // as written, so the summary matches the records
	}
	_ = pacer.WaitUntil(ctx, start.Add(time.Duration(len(walls))*o.interval))
	elapsed := time.Since(start)
	total := cgroup.Read().Counters.Sub(first)

	wallStats := stats.Summarize(walls)
	summary := burstSummary{
		Type: "summary", Rounds: len(walls),
		P50WallMs: record.MsNum(wallStats.P50), MaxWallMs: record.MsNum(wallStats.Max),
		Counters: total, AvgCores: cores(total.UsageUsec, elapsed), ElapsedS: elapsed.Seconds(),
	}
	return summary, out.Write(summary)
}

// alignedStart is the first grid point (a multiple of interval since the Unix epoch) plus offset
// that is not before now.
func alignedStart(now time.Time, interval, offset time.Duration) time.Time {
	ns := now.UnixNano()
	at := ns - ns%int64(interval) + int64(offset)
	if at < ns {
		at += int64(interval)
	}
	return time.Unix(0, at)
}

func offsetWithin(offset, interval time.Duration) error {
	if offset < 0 || offset >= interval {
		return fmt.Errorf("-offset %v must lie in [0, -interval %v)", offset, interval)
	}
	return nil
}

// burnerPool keeps one goroutine per thread, each locked to its OS thread
// for the whole run, so rounds do not pay for thread creation.
type burnerPool struct {
	starts  []chan time.Duration
	results chan burnResult
}

type burnResult struct {
	used time.Duration
	cpu  int // the CPU the thread mainly ran on (threadcpu.Placement), -1 if unknown
	err  error
}

// placementEvery: the burn reads its thread's CPU at every this many of its clock readings (a few µs
// apart), often enough to see where a burn of a few ms ran and rarely enough to cost under 1%.
const placementEvery = 4

// newBurnerPool starts the threads; with cpus, thread i is pinned to cpus[i % len(cpus)] before it
// burns, and it returns once every pin holds (the first failure otherwise).
func newBurnerPool(threads int, cpus []int) (*burnerPool, error) {
	p := &burnerPool{results: make(chan burnResult, threads)}
	pinned := make(chan error, threads)
	for i := 0; i < threads; i++ {
		start := make(chan time.Duration)
		p.starts = append(p.starts, start)
		go func() {
			runtime.LockOSThread()
			if len(cpus) == 0 {
				defer runtime.UnlockOSThread()
				pinned <- nil
			} else {
				// never unlocked: a pinned thread ends with its goroutine instead of returning to the runtime
				pinned <- threadcpu.Pin(cpus[i%len(cpus)])
			}
			for work := range start {
				var where threadcpu.Placement
				calls := 0
				used, err := threadcpu.Burn(work, func() bool {
					if calls%placementEvery == 0 {
						where.Sample()
					}
					calls++
					return false
				})
				p.results <- burnResult{used, where.Main(), err}
			}
		}()
	}
	var firstErr error
	for i := 0; i < threads; i++ {
		if err := <-pinned; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		p.close()
		return nil, firstErr
	}
	return p, nil
}

// burnAll starts every thread's burn as close together as possible and
// returns, once all are done, the mean thread CPU time burned and how many
// distinct CPUs the threads mainly ran on.
func (p *burnerPool) burnAll(work time.Duration) (time.Duration, int, error) {
	for _, start := range p.starts {
		start <- work
	}
	var sum time.Duration
	var firstErr error
	cpus := map[int]bool{}
	for range p.starts {
		r := <-p.results
		sum += r.used
		if r.cpu >= 0 {
			cpus[r.cpu] = true
		}
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
	}
	return sum / time.Duration(len(p.starts)), len(cpus), firstErr
}

func (p *burnerPool) close() {
	for _, start := range p.starts {
		close(start)
	}
}

func fmtMs(v *float64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%.1f", *v)
}
