package cgroup

import (
	"fmt"
	"path/filepath"
)

// v1Dir finds the directory of a v1 membership. The hierarchy is mounted
// under root either by its controller list ("cpu,cpuacct") or by a single
// controller name (separate mounts, or the usual "cpu" symlink to the
// combined one). When the process's path is not visible below the mount
// (a container whose mount shows only its own cgroup), the mount itself is
// the process's cgroup.
func v1Dir(root string, m membership, controller string) (string, bool) {
	byList := filepath.Join(root, m.mountName)
	byName := filepath.Join(root, controller)
	return firstExisting(
		filepath.Join(byList, m.path), filepath.Join(byName, m.path),
		byList, byName,
	)
}

func readV1(root string, cpu, acct membership, hasAcct bool) Record {
	rec := Record{Version: 1, Path: cpu.path}
	var errs problems
	dir, ok := v1Dir(root, cpu, "cpu")
	if !ok {
		rec.Error = fmt.Sprintf("no cpu controller directory for %s under %s", cpu.path, root)
		return rec
	}

	if quota, err := readInt(dir, "cpu.cfs_quota_us"); err != nil {
		errs.add(err)
	} else if quota >= 0 { // -1 means no limit
		rec.QuotaUS = ptr(quota)
	}
	if period, err := readInt(dir, "cpu.cfs_period_us"); err != nil {
		errs.add(err)
	} else {
		rec.PeriodUS = ptr(period)
	}
	// cpu.cfs_burst_us exists only on kernels >= 5.14.
	if burst, err := readInt(dir, "cpu.cfs_burst_us"); err == nil {
		rec.BurstUS = ptr(burst)
	} else if !isMissing(err) {
		errs.add(err)
	}
	if shares, err := readInt(dir, "cpu.shares"); err != nil {
		errs.add(err)
	} else {
		rec.Shares = ptr(shares)
	}
	if stat, err := readFlatKeyed(dir, "cpu.stat"); err != nil {
		errs.add(err)
	} else {
		rec.NrPeriods = lookup(stat, "nr_periods")
		rec.NrThrottled = lookup(stat, "nr_throttled")
		rec.ThrottledUsec = scaled(lookup(stat, "throttled_time"), 1000) // ns
		rec.NrBursts = lookup(stat, "nr_bursts")                         // kernels >= 5.14
		rec.BurstUsec = scaled(lookup(stat, "burst_time"), 1000)         // ns
	}

	// Usage lives in the cpuacct controller, possibly a separate mount.
	if hasAcct {
		if acctDir, ok := v1Dir(root, acct, "cpuacct"); !ok {
			errs.add(fmt.Errorf("no cpuacct directory for %s under %s", acct.path, root))
		} else if usage, err := readInt(acctDir, "cpuacct.usage"); err != nil {
			errs.add(err)
		} else {
			rec.UsageUsec = ptr(usage / 1000) // ns
		}
	}
	rec.Error = errs.String()
	return rec
}
