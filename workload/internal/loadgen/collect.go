package loadgen

import (
	"net/http"
	"sync"
	"time"

	"cpulab/internal/record"
	"cpulab/internal/stats"
)

// result is the outcome of one request.
type result struct {
	ep     string
	target int   // -1 when no connection was made
	conn   int64 // -1 when no connection was made
	sched  time.Time
	sent   time.Time
	done   time.Time
	status int
	err    string
}

func (r result) ok() bool { return r.err == "" && r.status == http.StatusOK }

// reqRecord is the per-request record (docs/RECORDS.md, load).
type reqRecord struct {
	Type    string  `json:"type"`
	EP      string  `json:"ep"`
	Target  int     `json:"target"`
	Conn    int64   `json:"conn"`
	SchedMs float64 `json:"sched_ms"`
	LatMs   float64 `json:"lat_ms"`
	LateMs  float64 `json:"late_ms"`
	OK      bool    `json:"ok"`
	Status  int     `json:"status"`
	Err     string  `json:"err"`
}

// endpointAcc accumulates the measured requests of one endpoint.
type endpointAcc struct {
	sent, ok, errors int
	latMs            []float64 // successful requests only
}

// collector writes a record per measured request and keeps what the
// summary needs.
type collector struct {
	out         *record.Writer
	windowStart time.Time

	mu        sync.Mutex
	eps       map[string]*endpointAcc
	lateMs    []float64
	perTarget []int64
	writeErr  error
}

func newCollector(out *record.Writer, windowStart time.Time, targets int) *collector {
	return &collector{
		out:         out,
		windowStart: windowStart,
		eps:         map[string]*endpointAcc{epWork: {}, epPing: {}},
		perTarget:   make([]int64, targets),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (c *collector) add(r result) {
	rec := reqRecord{
		Type: "req", EP: r.ep, Target: r.target, Conn: r.conn,
		SchedMs: record.Ms(ms(r.sched.Sub(c.windowStart))),
		LatMs:   record.Ms(ms(r.done.Sub(r.sched))),
		LateMs:  record.Ms(ms(r.sent.Sub(r.sched))),
		OK:      r.ok(), Status: r.status, Err: r.err,
	}
	err := c.out.Write(rec)

	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.writeErr == nil {
		c.writeErr = err
	}
	acc := c.eps[r.ep]
	acc.sent++
	if rec.OK {
		acc.ok++
		acc.latMs = append(acc.latMs, rec.LatMs)
	} else {
		acc.errors++
	}
	c.lateMs = append(c.lateMs, rec.LateMs)
	if r.target >= 0 {
		c.perTarget[r.target]++
	}
}

// EndpointSummary summarises one endpoint over the window; latency
// quantiles cover successful requests, null when there were none.
type EndpointSummary struct {
	Sent        int      `json:"sent"`
	OK          int      `json:"ok"`
	Errors      int      `json:"errors"`
	AchievedRPS *float64 `json:"achieved_rps"`
	P50Ms       *float64 `json:"p50_ms"`
	P90Ms       *float64 `json:"p90_ms"`
	P99Ms       *float64 `json:"p99_ms"`
	P999Ms      *float64 `json:"p999_ms"`
	MaxMs       *float64 `json:"max_ms"`
}

// Summary is the last record of a load run.
type Summary struct {
	Type                 string          `json:"type"`
	Mode                 string          `json:"mode,omitempty"` // "closed"; absent for open loop
	WindowS              float64         `json:"window_s"`
	Work                 EndpointSummary `json:"work"`
	Ping                 EndpointSummary `json:"ping"`
	LateP99Ms            *float64        `json:"late_p99_ms"`
	LateMaxMs            *float64        `json:"late_max_ms"`
	ConnectionsPerTarget []int64         `json:"connections_per_target"`
	RequestsPerTarget    []int64         `json:"requests_per_target"`
	ThroughputRPS        *float64        `json:"throughput_rps,omitempty"` // closed loop only
}

func (c *collector) summary(window time.Duration, conns []int64) Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	late := stats.Summarize(c.lateMs)
	return Summary{
		Type:                 "summary",
		WindowS:              window.Seconds(),
		Work:                 summarizeEndpoint(c.eps[epWork], window),
		Ping:                 summarizeEndpoint(c.eps[epPing], window),
		LateP99Ms:            record.MsNum(late.P99),
		LateMaxMs:            record.MsNum(late.Max),
		ConnectionsPerTarget: conns,
		RequestsPerTarget:    append([]int64(nil), c.perTarget...),
	}
}

// achieved_rps counts successful requests per second of window.
func summarizeEndpoint(acc *endpointAcc, window time.Duration) EndpointSummary {
	s := stats.Summarize(acc.latMs)
	return EndpointSummary{
		Sent: acc.sent, OK: acc.ok, Errors: acc.errors,
		AchievedRPS: record.Num(float64(acc.ok) / window.Seconds()),
		P50Ms:       record.MsNum(s.P50), P90Ms: record.MsNum(s.P90), P99Ms: record.MsNum(s.P99),
		P999Ms: record.MsNum(s.P999), MaxMs: record.MsNum(s.Max),
	}
}

func (c *collector) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeErr
}
