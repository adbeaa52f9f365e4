package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"cpulab/internal/record"
	"cpulab/internal/service"
)

// runLoad runs cfg against the given targets and returns the decoded records.
func runLoad(t *testing.T, ctx context.Context, cfg Config) (Summary, []map[string]any) {
	t.Helper()
	var out bytes.Buffer
	w := record.NewWriter(&out, false)
	summary, err := Run(ctx, cfg, w)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	scanner := bufio.NewScanner(&out)
	for scanner.Scan() {
		var m map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &m); err != nil {
			t.Fatalf("bad record %q: %v", scanner.Text(), err)
		}
		recs = append(recs, m)
	}
	return summary, recs
}

func ofType(recs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}

func newService(t *testing.T) (*service.Server, string) {
	t.Helper()
	s, err := service.New(service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func TestOpenLoopRecordsMeasuredRequests(t *testing.T) {
	_, url := newService(t)
	cfg := Config{Targets: []string{url + "/"}, RPS: 200, Clump: 1, PingRPS: 50,
		Duration: time.Second, Warmup: 300 * time.Millisecond, Seed: 1, Timeout: 2 * time.Second}
	summary, recs := runLoad(t, context.Background(), cfg)

	reqs := ofType(recs, "req")
	if got := summary.Work.Sent + summary.Ping.Sent; got != len(reqs) {
		t.Errorf("summary counts %d requests, %d records written", got, len(reqs))
	}
	if summary.Work.Sent < 120 || summary.Work.Sent > 280 || summary.Ping.Sent < 20 {
		t.Errorf("sent work=%d ping=%d, want about 200 and 50", summary.Work.Sent, summary.Ping.Sent)
	}
	if summary.Work.Errors+summary.Ping.Errors != 0 {
		t.Errorf("errors: %+v %+v", summary.Work, summary.Ping)
	}
	for _, r := range reqs {
		sched, lat, late := r["sched_ms"].(float64), r["lat_ms"].(float64), r["late_ms"].(float64)
		if sched < 0 || sched >= 1000 {
			t.Fatalf("request scheduled outside the window (warmup leaked?): %v", r)
		}
		if late < 0 || lat < late || r["ok"] != true || r["status"] != 200.0 || r["target"] != 0.0 {
			t.Fatalf("bad request record %v", r)
		}
	}
	if summary.WindowS < 0.99 || summary.WindowS > 1.01 {
		t.Errorf("window_s = %v", summary.WindowS)
	}
	if summary.Work.P50Ms == nil || summary.LateP99Ms == nil {
		t.Errorf("summary lacks quantiles: %+v", summary)
	}
	stats := ofType(recs, "stats")
	if len(stats) != 2 || stats[0]["when"] != "before" || stats[1]["when"] != "after" {
		t.Fatalf("stats records: %v", stats)
	}
	if _, ok := stats[0]["stats"].(map[string]any)["cgroup"]; !ok {
		t.Errorf("stats record lacks the /stats answer: %v", stats[0])
	}
	if last := recs[len(recs)-1]; last["type"] != "summary" {
		t.Errorf("last record is %v", last["type"])
	}
}

func TestConnectionsAreBalancedAndReused(t *testing.T) {
	servers := make([]*service.Server, 3)
	var targets []string
	for i := range servers {
		var url string
		servers[i], url = newService(t)
		targets = append(targets, url)
	}
	// Clumps of 20 open many connections at once; no warmup, so the
	// servers' counters and the records cover the same requests.
	cfg := Config{Targets: targets, RPS: 400, Clump: 20, Duration: time.Second, Seed: 5, Timeout: 2 * time.Second}
	summary, recs := runLoad(t, context.Background(), cfg)

	perTargetFromRecords := make([]int64, len(targets))
	for _, r := range ofType(recs, "req") {
		perTargetFromRecords[int(r["target"].(float64))]++
	}
	var conns int64
	for i, s := range servers {
		if got := s.Requests(); got != perTargetFromRecords[i] || got != summary.RequestsPerTarget[i] {
			t.Errorf("target %d served %d, records say %d, summary says %d",
				i, got, perTargetFromRecords[i], summary.RequestsPerTarget[i])
		}
		if summary.ConnectionsPerTarget[i] == 0 {
			t.Errorf("target %d got no connection: %v", i, summary.ConnectionsPerTarget)
		}
		conns += summary.ConnectionsPerTarget[i]
	}
	if int(conns) >= summary.Work.Sent/4 {
		t.Errorf("%d connections for %d requests: connections are not reused", conns, summary.Work.Sent)
	}
}

func TestScheduleDoesNotWaitForASlowServer(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/work" {
			time.Sleep(300 * time.Millisecond)
		}
	}))
	defer slow.Close()
	cfg := Config{Targets: []string{slow.URL}, RPS: 100, Clump: 1, Duration: 500 * time.Millisecond,
		Seed: 2, Timeout: 2 * time.Second}
	summary, recs := runLoad(t, context.Background(), cfg)
	// Open loop: ~50 requests are sent on schedule although each takes
	// 300 ms, and latency includes the whole wait.
	if summary.Work.Sent < 25 {
		t.Errorf("only %d requests sent", summary.Work.Sent)
	}
	for _, r := range ofType(recs, "req") {
		if r["lat_ms"].(float64) < 300 || r["late_ms"].(float64) > 50 {
			t.Fatalf("record %v", r)
		}
	}
}

func TestRunStopsByItselfWhenTargetsHang(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	cfg := Config{Targets: []string{hang.URL}, RPS: 50, Clump: 1, Duration: 300 * time.Millisecond,
		Seed: 3, Timeout: 200 * time.Millisecond}
	start := time.Now()
	summary, recs := runLoad(t, context.Background(), cfg)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Run took %v", took)
	}
	if summary.Work.Errors == 0 || summary.Work.OK != 0 || summary.Work.P50Ms != nil {
		t.Errorf("summary %+v", summary.Work)
	}
	for _, r := range ofType(recs, "stats") {
		if r["err"] == nil {
			t.Errorf("stats of a hanging target without err: %v", r)
		}
	}
}

func TestUnreachableTargetCountsErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := Config{Targets: []string{"http://" + addr}, RPS: 50, Clump: 1, PingRPS: 20,
		Duration: 300 * time.Millisecond, Seed: 4, Timeout: time.Second}
	summary, recs := runLoad(t, context.Background(), cfg)
	if summary.Work.OK != 0 || summary.Work.Errors != summary.Work.Sent || summary.Ping.Errors != summary.Ping.Sent {
		t.Errorf("summary %+v %+v", summary.Work, summary.Ping)
	}
	for _, r := range ofType(recs, "req") {
		if r["target"] != -1.0 || r["conn"] != -1.0 || r["err"] == "" || r["ok"] != false {
			t.Fatalf("record %v", r)
		}
	}
}

func TestClosedLoop(t *testing.T) {
	_, url := newService(t)
	cfg := Config{Targets: []string{url}, Closed: true, Workers: 3, Duration: 500 * time.Millisecond,
		Warmup: 100 * time.Millisecond, Seed: 1, Timeout: time.Second}
	summary, recs := runLoad(t, context.Background(), cfg)
	if summary.Mode != "closed" || summary.ThroughputRPS == nil || *summary.ThroughputRPS < 50 {
		t.Errorf("summary %+v", summary)
	}
	for _, r := range ofType(recs, "req") {
		if r["late_ms"] != 0.0 || r["ok"] != true {
			t.Fatalf("record %v", r)
		}
	}
	if conns := summary.ConnectionsPerTarget[0]; conns < 1 || conns > 3 {
		t.Errorf("%d connections for 3 workers", conns)
	}
}

func TestCancelEndsTheWindowEarly(t *testing.T) {
	_, url := newService(t)
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	cfg := Config{Targets: []string{url}, RPS: 100, Clump: 1, Duration: time.Hour, Seed: 1, Timeout: time.Second}
	start := time.Now()
	summary, _ := runLoad(t, ctx, cfg)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Run took %v after cancel", took)
	}
	if summary.WindowS > 1 {
		t.Errorf("window_s = %v", summary.WindowS)
	}
}

func TestValidateNamesTheBadSetting(t *testing.T) {
	good := Config{Targets: []string{"http://127.0.0.1:1"}, RPS: 1, Clump: 1, Duration: time.Second, Timeout: time.Second}
	tests := []struct {
		field  string
		mutate func(*Config)
	}{
		{"target", func(c *Config) { c.Targets = nil }},
		{"target", func(c *Config) { c.Targets = []string{"https://127.0.0.1:1"} }},
		{"target", func(c *Config) { c.Targets = []string{"http://127.0.0.1"} }},
		{"target", func(c *Config) { c.Targets = []string{"http://127.0.0.1:1/work"} }},
		{"target", func(c *Config) { c.Targets = []string{"127.0.0.1:1"} }},
		{"rps", func(c *Config) { c.RPS = 0 }},
		{"rps", func(c *Config) { c.RPS = -1 }},
		{"clump", func(c *Config) { c.Clump = 0 }},
		{"ping-rps", func(c *Config) { c.PingRPS = -1 }},
		{"duration", func(c *Config) { c.Duration = 0 }},
		{"warmup", func(c *Config) { c.Warmup = -time.Second }},
		{"timeout", func(c *Config) { c.Timeout = 0 }},
		{"workers", func(c *Config) { c.Closed, c.Workers = true, 0 }},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config rejected: %v", err)
	}
	for _, tt := range tests {
		cfg := good
		cfg.Targets = append([]string(nil), good.Targets...)
		tt.mutate(&cfg)
		var fe *FieldError
		if err := cfg.Validate(); !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("want a %s error, got %v", tt.field, err)
		} else if !strings.Contains(err.Error(), tt.field) {
			t.Errorf("error %q does not name %s", err, tt.field)
		}
	}
}

func TestOpenLoopSendsTheScheduledCount(t *testing.T) {
	_, url := newService(t)
	// The pacer puts round(rate x span / clump) arrivals in the warm-up and
	// in the window: 10 clumps of 10 /work and 15 /ping here, whatever the
	// seed.
	for _, seed := range []uint64{1, 2} {
		cfg := Config{Targets: []string{url}, RPS: 200, Clump: 10, PingRPS: 30,
			Duration: 500 * time.Millisecond, Warmup: 200 * time.Millisecond, Seed: seed, Timeout: 2 * time.Second}
		summary, recs := runLoad(t, context.Background(), cfg)
		if summary.Work.Sent != 100 || summary.Ping.Sent != 15 {
			t.Errorf("seed %d: sent work=%d ping=%d, want 100 and 15", seed, summary.Work.Sent, summary.Ping.Sent)
		}
		perInstant := map[float64]int{}
		for _, r := range ofType(recs, "req") {
			if sched := r["sched_ms"].(float64); sched < 0 || sched >= 500 {
				t.Fatalf("seed %d: request scheduled outside the window: %v", seed, r)
			}
			if r["ep"] == epWork {
				perInstant[r["sched_ms"].(float64)]++
			}
		}
		for sched, n := range perInstant {
			if n%10 != 0 {
				t.Errorf("seed %d: %d /work requests scheduled at %v ms, not whole clumps of 10", seed, n, sched)
			}
		}
	}
}

func TestLateWakeStillSendsWhatWasDueInTheWindow(t *testing.T) {
	end := time.Now().Add(-time.Millisecond) // the window is over
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	<-ctx.Done()
	if !dueBeforeDeadline(ctx, end.Add(-time.Microsecond)) {
		t.Error("an arrival due before the window's end was dropped")
	}
	if dueBeforeDeadline(ctx, end) {
		t.Error("an arrival due at the window's end was kept")
	}
	interrupted, stop := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
	stop()
	if dueBeforeDeadline(interrupted, time.Now().Add(-time.Second)) {
		t.Error("an interrupted run kept sending")
	}
}

func TestValidateRefusesAScheduleTooLargeToPlace(t *testing.T) {
	cfg := Config{Targets: []string{"http://127.0.0.1:1"}, RPS: 1e300, Clump: 1, Duration: time.Second,
		Timeout: time.Second}
	err := cfg.Validate()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "rps" {
		t.Fatalf("Validate() = %v, want a FieldError naming rps", err)
	}
}
