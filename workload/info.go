package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"cpulab/internal/cgroup"
	"cpulab/internal/record"
)

type infoSummary struct {
	Type       string        `json:"type"`
	GOMAXPROCS int           `json:"gomaxprocs"`
	NumCPU     int           `json:"num_cpu"`
	Cgroup     cgroup.Record `json:"cgroup"`
}

func runInfo(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("info", "Print the Go runtime's CPU view and the process's cgroup CPU settings.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	out := record.NewWriter(stdout, true)
	header := record.NewHeader(buildInfo(), "info", fs)
	if err := out.Write(header); err != nil {
		return err
	}
	summary := infoSummary{Type: "summary", GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(),
		Cgroup: header.Cgroup}
	if err := out.Write(summary); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s (%s): GOMAXPROCS=%d NumCPU=%d env GOMAXPROCS=%q GODEBUG=%q\n",
		header.GoVersion, header.Variant, summary.GOMAXPROCS, summary.NumCPU, header.Env.GOMAXPROCS, header.Env.GODEBUG)
	fmt.Fprintf(stderr, "cgroup v%d %s: %s\n", summary.Cgroup.Version, summary.Cgroup.Path, describeLimits(summary.Cgroup))
	return nil
}

// describeLimits renders the settings the way the kernel files read.
func describeLimits(c cgroup.Record) string {
	quota := "max"
	if c.QuotaUS != nil {
		quota = fmt.Sprint(*c.QuotaUS)
	}
	text := fmt.Sprintf("quota %s period %s", quota, orNull(c.PeriodUS))
	if c.Version == 1 {
		text += " shares " + orNull(c.Shares)
	} else {
		text += " weight " + orNull(c.Weight)
	}
	if c.Error != "" {
		text += " (error: " + c.Error + ")"
	}
	return text
}

func orNull(v *int64) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(*v)
}
