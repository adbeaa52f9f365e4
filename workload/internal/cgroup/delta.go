package cgroup

// Counters are the cumulative cpu.stat values of a Record that experiments
// difference over a window.
type Counters struct {
	NrPeriods     *int64
	NrThrottled   *int64
	ThrottledUsec *int64
	UsageUsec     *int64
	NrBursts      *int64
	BurstUsec     *int64
}

// Counters returns the cumulative counters of r.
func (r Record) Counters() Counters {
	return Counters{r.NrPeriods, r.NrThrottled, r.ThrottledUsec, r.UsageUsec, r.NrBursts, r.BurstUsec}
}

// Sub returns c - before, field by field; a field is nil when either side
// is nil (it could not be read, so no delta can be claimed).
func (c Counters) Sub(before Counters) Counters {
	return Counters{
		NrPeriods:     diff(c.NrPeriods, before.NrPeriods),
		NrThrottled:   diff(c.NrThrottled, before.NrThrottled),
		ThrottledUsec: diff(c.ThrottledUsec, before.ThrottledUsec),
		UsageUsec:     diff(c.UsageUsec, before.UsageUsec),
		NrBursts:      diff(c.NrBursts, before.NrBursts),
		BurstUsec:     diff(c.BurstUsec, before.BurstUsec),
	}
}

func diff(a, b *int64) *int64 {
	if a == nil || b == nil {
		return nil
	}
	return ptr(*a - *b)
}
