package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func readV2(root, path string) Record {
	rec := Record{Version: 2, Path: path}
	var errs problems
	// On a hybrid host the v2 tree is mounted at <root>/unified; inside a
	// container the mount may show only the container's own cgroup.
	dir, ok := firstExisting(filepath.Join(root, path), filepath.Join(root, "unified", path))
	if !ok {
		dir = root
	}
	isRoot := path == "/"

	// The root cgroup has no cpu.max or cpu.weight: it is never limited.
	if quota, period, err := readCPUMax(dir); err == nil {
		rec.QuotaUS, rec.PeriodUS = quota, ptr(period)
	} else if !(isRoot && isMissing(err)) {
		errs.add(explainMissing(err))
	}
	if burst, err := readInt(dir, "cpu.max.burst"); err == nil {
		rec.BurstUS = ptr(burst)
	} else if !isMissing(err) {
		errs.add(err)
	}
	if weight, err := readInt(dir, "cpu.weight"); err == nil {
		rec.Weight = ptr(weight)
	} else if !(isRoot && isMissing(err)) {
		errs.add(explainMissing(err))
	}
	if stat, err := readFlatKeyed(dir, "cpu.stat"); err != nil {
		errs.add(err)
	} else {
		rec.NrPeriods = lookup(stat, "nr_periods")
		rec.NrThrottled = lookup(stat, "nr_throttled")
		rec.ThrottledUsec = lookup(stat, "throttled_usec")
		rec.UsageUsec = lookup(stat, "usage_usec")
		rec.NrBursts = lookup(stat, "nr_bursts") // kernels >= 5.14
		rec.BurstUsec = lookup(stat, "burst_usec")
	}
	rec.Error = errs.String()
	return rec
}

// readCPUMax parses cpu.max: "max 100000" (no limit) or "200000 100000".
func readCPUMax(dir string) (quota *int64, period int64, err error) {
	text, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	if err != nil {
		return nil, 0, err
	}
	fields := strings.Fields(string(text))
	if len(fields) != 2 {
		return nil, 0, fmt.Errorf("cpu.max: want \"<quota|max> <period>\", got %q", strings.TrimSpace(string(text)))
	}
	period, err = strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("cpu.max period: %w", err)
	}
	if fields[0] == "max" {
		return nil, period, nil
	}
	q, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("cpu.max quota: %w", err)
	}
	return &q, period, nil
}

// explainMissing adds the usual cause to a missing cpu.* file in v2.
func explainMissing(err error) error {
	if isMissing(err) {
		return fmt.Errorf("%w (cpu controller not enabled for this cgroup?)", err)
	}
	return err
}
