package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"cpulab/internal/pacer"
	"cpulab/internal/record"
)

const (
	epWork = "work"
	epPing = "ping"

	// The streams drawn from the one seed (rand.NewPCG(seed, stream)): the
	// /work and /ping arrival schedules and the balancer's choice of
	// connection. throttlelab/model/seeds.py names them too; a test holds
	// them to testdata/seeds.json, which it writes.
	workStream    = 1
	pingStream    = 2
	balanceStream = 0xba1a

	closedLoopBackoff = 10 * time.Millisecond
)

// generator sends requests and hands their results to the collector.
type generator struct {
	cfg      Config
	client   *http.Client
	coll     *collector
	inflight sync.WaitGroup
	// reqCtx bounds every request, so the run ends even if a target hangs.
	reqCtx context.Context
}

// Run drives the targets for cfg.Warmup + cfg.Duration (less if ctx ends
// first), writes the records to out and returns the summary it wrote. It
// always stops by itself: scheduling ends with the window and every
// request is bounded by cfg.Timeout.
func Run(ctx context.Context, cfg Config, out *record.Writer) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	t0 := time.Now()
	windowStart := t0.Add(cfg.Warmup)
	end := windowStart.Add(cfg.Duration)
	reqCtx, cancelRequests := context.WithDeadline(context.Background(), end.Add(cfg.Timeout+2*time.Second))
	defer cancelRequests()

	bal := newBalancer(cfg.Targets, cfg.Seed)
	transport := bal.transport(connectionBound(cfg))
	defer transport.CloseIdleConnections()
	g := &generator{
		cfg: cfg, reqCtx: reqCtx,
		client: &http.Client{Timeout: cfg.Timeout, Transport: transport},
		coll:   newCollector(out, windowStart, len(cfg.Targets)),
	}
	probe := newStatsProbe(cfg.Targets, cfg.Timeout, out)

	waitBefore := probe.readAllAt(ctx, windowStart, "before")
	windowEnd := g.sendUntil(ctx, t0, end)
	waitBefore()
	if !windowEnd.Before(windowStart) {
		probe.readAll("after")
	}
	g.inflight.Wait()

	summary := g.coll.summary(max(0, windowEnd.Sub(windowStart)), bal.connectionsPerTarget())
	if cfg.Closed {
		summary.Mode = "closed"
		summary.ThroughputRPS = summary.Work.AchievedRPS
	}
	if err := out.Write(summary); err != nil {
		return summary, err
	}
	if err := g.coll.err(); err != nil {
		return summary, err
	}
	return summary, probe.err()
}

// connectionBound is the most connections the generator may hold: one per
// worker in a closed loop without pings (a worker never has two requests in
// flight), no bound otherwise (an open loop sends regardless of replies).
func connectionBound(cfg Config) int {
	if cfg.Closed && cfg.PingRPS == 0 {
		return cfg.Workers
	}
	return 0
}

// sendUntil sends the configured streams from t0 until end or until ctx
// ends, and returns when sending stopped (at most end). Requests still in
// flight are tracked by g.inflight.
func (g *generator) sendUntil(ctx context.Context, t0, end time.Time) time.Time {
	sendCtx, stopSending := context.WithDeadline(ctx, end)
	defer stopSending()
	var senders sync.WaitGroup
	if g.cfg.Closed {
		g.startWorkers(sendCtx, &senders)
	} else {
		g.startStream(sendCtx, &senders, epWork, g.cfg.RPS, g.cfg.Clump, workStream, t0)
	}
	if g.cfg.PingRPS > 0 {
		g.startStream(sendCtx, &senders, epPing, g.cfg.PingRPS, 1, pingStream, t0)
	}
	<-sendCtx.Done()
	stopped := time.Now()
	if stopped.After(end) {
		stopped = end
	}
	senders.Wait()
	return stopped
}

// startStream starts an open-loop stream of ep requests: a Poisson process
// conditioned on its count, so the warm-up and the window each hold a fixed
// number of arrivals (see package pacer). The sender ends after the last
// arrival, or when ctx ends: an arrival due before ctx's deadline is still
// sent when the sender wakes after it (it belongs to the window, only its
// send is late), while a cancelled ctx drops what is left.
func (g *generator) startStream(ctx context.Context, wg *sync.WaitGroup, ep string,
	rate float64, clump int, stream uint64, t0 time.Time) {
	schedule, err := pacer.New(rate, clump, g.cfg.Warmup, g.cfg.Duration, g.cfg.Seed, stream)
	if err != nil {
		// Config.Validate checks every argument; only an absurd rate x
		// duration (over 2^53 arrivals) gets here.
		panic(fmt.Sprintf("loadgen: %s schedule: %v (Config.Validate refuses this)", ep, err))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		// This goroutine ends locked on purpose; see LockForPreciseSleep.
		_ = pacer.LockForPreciseSleep() // without it sleeps are only less precise
		for {
			arrival, ok := schedule.Next()
			if !ok {
				return // every arrival sent
			}
			due := t0.Add(arrival.At)
			if pacer.SleepUntil(ctx, due) != nil && !dueBeforeDeadline(ctx, due) {
				return // window over or interrupted
			}
			for range arrival.Count {
				g.inflight.Add(1)
				go func() {
					defer g.inflight.Done()
					_ = g.send(ep, due)
				}()
			}
		}
	}()
}

// dueBeforeDeadline reports whether ctx ended at its deadline (not by a
// cancel) and due comes before that deadline.
func dueBeforeDeadline(ctx context.Context, due time.Time) bool {
	deadline, ok := ctx.Deadline()
	return ok && errors.Is(ctx.Err(), context.DeadlineExceeded) && due.Before(deadline)
}

// startWorkers starts the closed loop: each worker sends /work as soon as
// its previous request finished.
func (g *generator) startWorkers(ctx context.Context, wg *sync.WaitGroup) {
	for range g.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if !g.send(epWork, time.Time{}) {
					// Back off after a failure, so a refusing target is not
					// hammered in a hot loop that floods the records.
					_ = pacer.WaitUntil(ctx, time.Now().Add(closedLoopBackoff))
				}
			}
		}()
	}
}

// send performs one request scheduled at sched (zero: now, for the closed
// loop), records it when it belongs to the window and reports whether it
// succeeded. Latency runs from sched, not from the actual send, so time
// the request waited for the generator counts against the service.
func (g *generator) send(ep string, sched time.Time) bool {
	res := result{ep: ep, target: -1, conn: -1, sched: sched}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if c, ok := info.Conn.(*trackedConn); ok {
			res.target, res.conn = c.target, c.id
		}
	}}
	ctx := httptrace.WithClientTrace(g.reqCtx, trace)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+balancedHost+"/"+ep, nil)
	res.sent = time.Now()
	if sched.IsZero() {
		res.sched = res.sent
	}
	if err == nil {
		var resp *http.Response
		if resp, err = g.client.Do(req); err == nil {
			_, err = io.Copy(io.Discard, resp.Body) // drain so the connection is reused
			resp.Body.Close()
			res.status = resp.StatusCode
		}
	}
	res.done = time.Now()
	if err != nil {
		res.err = err.Error()
	}
	if !res.sched.Before(g.coll.windowStart) {
		g.coll.add(res)
	}
	return res.ok()
}
