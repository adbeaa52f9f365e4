package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"cpulab/internal/cgroup"
	"cpulab/internal/record"
	"cpulab/internal/threadcpu"
)

type spinOptions struct {
	threads  int
	report   time.Duration
	duration time.Duration
}

type spinReport struct {
	Type  string   `json:"type"`
	TS    float64  `json:"t_s"`
	Cores *float64 `json:"cores"`
	cgroup.DeltaTotals
}

type spinSummary struct {
	Type     string   `json:"type"`
	ElapsedS float64  `json:"elapsed_s"`
	AvgCores *float64 `json:"avg_cores"`
	cgroup.Totals
}

func runSpin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o spinOptions
	fs := newFlagSet("spin", "Keep -threads threads busy; every -report write the cgroup's CPU use in cores.\n"+
		"Stops after -duration (0: on SIGTERM/SIGINT) and writes a summary of the whole run.", stderr)
	fs.IntVar(&o.threads, "threads", 1, "busy threads; 0 = one per P (GOMAXPROCS), the book chapter's program")
	fs.DurationVar(&o.report, "report", time.Second, "report interval")
	fs.DurationVar(&o.duration, "duration", 0, "run time; 0 runs until SIGTERM or SIGINT")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := firstError(atLeast("threads", o.threads, 0), positiveDuration("report", o.report)); err != nil {
		return err
	}
	if o.threads == 0 {
		o.threads = runtime.GOMAXPROCS(0)
	}
	if o.duration < 0 {
		return badFlag("duration", "must be 0 (until a signal) or positive, got %v", o.duration)
	}
	out := record.NewWriter(stdout, true)
	if err := out.Write(record.NewHeader(buildInfo(), "spin", fs)); err != nil {
		return err
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	summary, err := spin(ctx, o, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "spin: %.1f s, %s cores on average, throttled %s periods of %s\n",
		summary.ElapsedS, fmtCores(summary.AvgCores), orNull(summary.NrThrottled), orNull(summary.NrPeriods))
	return nil
}

// spin keeps the threads busy until ctx ends, reporting every o.report,
// then writes the summary of the whole run.
func spin(ctx context.Context, o spinOptions, out *record.Writer) (spinSummary, error) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	first := cgroup.Read().Counters
	for i := 0; i < o.threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			threadcpu.Spin(&stop)
		}()
	}
	err := reportUntilDone(ctx, o.report, start, first, out)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		return spinSummary{}, err
	}

	elapsed := time.Since(start)
	total := cgroup.Read().Counters.Sub(first)
	summary := spinSummary{
		Type: "summary", ElapsedS: elapsed.Seconds(), AvgCores: cores(total.UsageUsec, elapsed),
		Totals: total.Totals,
	}
	return summary, out.Write(summary)
}

// reportUntilDone writes a report every interval until ctx ends; it
// returns only write errors. A report due before ctx's deadline is written
// even when this goroutine wakes only after the deadline (a busy host): its
// tick and the deadline are then both ready, and which one select takes is
// chance, so the count of reports would be too.
func reportUntilDone(ctx context.Context, interval time.Duration, start time.Time,
	first cgroup.Counters, out *record.Writer) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	deadline, bounded := ctx.Deadline()
	prev, prevAt := first, start
	for {
		select {
		case <-ctx.Done():
			select {
			case tick := <-ticker.C:
				if !bounded || !tick.Before(deadline) {
					return nil
				}
			default:
				return nil
			}
		case <-ticker.C:
		}
		now, at := cgroup.Read().Counters, time.Now()
		delta := now.Sub(prev)
		err := out.Write(spinReport{
			Type: "report", TS: at.Sub(start).Seconds(), Cores: cores(delta.UsageUsec, at.Sub(prevAt)),
			DeltaTotals: delta.AsDeltaTotals(),
		})
		if err != nil {
			return err
		}
		prev, prevAt = now, at
	}
}

// cores is CPU time used per wall time: 1.0 is one CPU fully busy.
func cores(usageUsec *int64, wall time.Duration) *float64 {
	if usageUsec == nil || wall <= 0 {
		return nil
	}
	return record.Num(float64(*usageUsec) / float64(wall.Microseconds()))
}

func fmtCores(v *float64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%.3f", *v)
}
