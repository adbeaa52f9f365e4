package cgroup

// Totals are the cumulative cpu.stat counters of both cgroup versions, as the raw log names them.
type Totals struct {
	NrPeriods     *int64 `json:"nr_periods"`
	NrThrottled   *int64 `json:"nr_throttled"`
	ThrottledUsec *int64 `json:"throttled_usec"`
	UsageUsec     *int64 `json:"usage_usec"`
}

// Bursts are the periods in which the group used more than its quota (borrowing from its burst
// budget) and the CPU so borrowed; null on kernels without a burst budget.
type Bursts struct {
	NrBursts  *int64 `json:"nr_bursts"`
	BurstUsec *int64 `json:"burst_usec"`
}

// Counters are the cumulative cpu.stat values of a Record that experiments difference over a window.
type Counters struct {
	Totals
	Bursts
}

// DeltaTotals are Totals differenced over a window, as a record of that window names them.
type DeltaTotals struct {
	DNrPeriods   *int64 `json:"d_nr_periods"`
	DNrThrottled *int64 `json:"d_nr_throttled"`
	DThrottledUs *int64 `json:"d_throttled_usec"`
	DUsageUsec   *int64 `json:"d_usage_usec"`
}

// DeltaBursts are Bursts differenced over a window.
type DeltaBursts struct {
	DNrBursts  *int64 `json:"d_nr_bursts"`
	DBurstUsec *int64 `json:"d_burst_usec"`
}

// Sub returns c - before, field by field; a field is nil when either side
// is nil (it could not be read, so no delta can be claimed).
func (c Counters) Sub(before Counters) Counters {
	return Counters{
		Totals{
			NrPeriods:     diff(c.NrPeriods, before.NrPeriods),
			NrThrottled:   diff(c.NrThrottled, before.NrThrottled),
			ThrottledUsec: diff(c.ThrottledUsec, before.ThrottledUsec),
			UsageUsec:     diff(c.UsageUsec, before.UsageUsec),
		},
		Bursts{
			NrBursts:  diff(c.NrBursts, before.NrBursts),
			BurstUsec: diff(c.BurstUsec, before.BurstUsec),
		},
	}
}

// AsDeltaTotals names a difference of Totals (c is one, from Sub) as a window's record does.
func (c Counters) AsDeltaTotals() DeltaTotals {
	return DeltaTotals{c.NrPeriods, c.NrThrottled, c.ThrottledUsec, c.UsageUsec}
}

// AsDeltaBursts names a difference of Bursts as a window's record does.
func (c Counters) AsDeltaBursts() DeltaBursts {
	return DeltaBursts{c.NrBursts, c.BurstUsec}
}

func diff(a, b *int64) *int64 {
	if a == nil || b == nil {
		return nil
	}
	return ptr(*a - *b)
}
