package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"cpulab/internal/loadgen"
	"cpulab/internal/record"
)

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg loadgen.Config
	var targets listFlag
	var label string
	fs := newFlagSet("load", "Open-loop Poisson load: -rps /work requests per second in clumps of -clump,\n"+
		"plus -ping-rps /ping; latency from the scheduled send time. With -closed, -workers\n"+
		"send /work back to back instead. Several targets are balanced per connection.", stderr)
	fs.Var(&targets, "target", "base URL http://host:port (repeat the flag or separate with commas)")
	fs.Float64Var(&cfg.RPS, "rps", 100, "/work requests per second (open loop)")
	fs.IntVar(&cfg.Clump, "clump", 1, "/work requests sent together per arrival; the mean rate stays -rps")
	fs.Float64Var(&cfg.PingRPS, "ping-rps", 0, "/ping requests per second (0: none)")
	fs.DurationVar(&cfg.Duration, "duration", 60*time.Second, "measured window")
	fs.DurationVar(&cfg.Warmup, "warmup", 10*time.Second, "load sent before the window and not recorded")
	fs.StringVar(&label, "label", "", "free text copied into the header's params")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the arrival schedules and the connection balancing")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.BoolVar(&cfg.Closed, "closed", false, "closed loop: -workers send /work as fast as answered")
	fs.IntVar(&cfg.Workers, "workers", 1, "closed-loop workers")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg.Targets = targets
	if err := cfg.Validate(); err != nil {
		var fe *loadgen.FieldError
		if errors.As(err, &fe) {
			return badFlag(fe.Field, "%s", fe.Msg)
		}
		return err
	}

	// Per-request records are buffered: writing must not delay sending.
	out := record.NewWriter(stdout, false)
	if err := out.Write(record.NewHeader(buildInfo(), "load", fs)); err != nil {
		return err
	}
	summary, err := loadgen.Run(ctx, cfg, out)
	if flushErr := out.Flush(); err == nil {
		err = flushErr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "load: %.1f s window; work %s; ping %s; send lateness p99 %s ms\n",
		summary.WindowS, describeEndpoint(summary.Work), describeEndpoint(summary.Ping), fmtMs(summary.LateP99Ms))
	return nil
}

func describeEndpoint(e loadgen.EndpointSummary) string {
	return fmt.Sprintf("%d sent, %d errors, p50 %s p99 %s ms", e.Sent, e.Errors, fmtMs(e.P50Ms), fmtMs(e.P99Ms))
}
