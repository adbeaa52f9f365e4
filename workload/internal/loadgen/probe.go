package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"cpulab/internal/pacer"
	"cpulab/internal/record"
)

// statsRecord carries one target's /stats answer (null with err on failure).
type statsRecord struct {
	Type   string          `json:"type"`
	When   string          `json:"when"`
	Target int             `json:"target"`
	Stats  json.RawMessage `json:"stats"`
	Err    string          `json:"err,omitempty"`
}

// statsProbe reads /stats of every target directly, not through the
// balancer, so each target is read exactly once.
type statsProbe struct {
	targets []string
	client  *http.Client
	out     *record.Writer

	mu       sync.Mutex
	writeErr error
}

func newStatsProbe(targets []string, timeout time.Duration, out *record.Writer) *statsProbe {
	// A fresh Transport has no proxy: requests go only to the targets.
	return &statsProbe{targets: targets, out: out,
		client: &http.Client{Timeout: timeout, Transport: &http.Transport{}}}
}

// readAllAt calls readAll at t in the background unless ctx ends first;
// the returned function waits for it.
func (p *statsProbe) readAllAt(ctx context.Context, t time.Time, when string) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if pacer.WaitUntil(ctx, t) == nil {
			p.readAll(when)
		}
	}()
	return func() { <-done }
}

// readAll reads every target concurrently and writes one record each.
func (p *statsProbe) readAll(when string) {
	var wg sync.WaitGroup
	for i, target := range p.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := statsRecord{Type: "stats", When: when, Target: i}
			if body, err := p.fetch("http://" + hostPort(target) + "/stats"); err != nil {
				rec.Err = err.Error()
			} else {
				rec.Stats = body
			}
			if err := p.out.Write(rec); err != nil {
				p.mu.Lock()
				p.writeErr = err
				p.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (p *statsProbe) fetch(url string) (json.RawMessage, error) {
	resp, err := p.client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	if !json.Valid(body) {
		return nil, fmt.Errorf("answer is not JSON")
	}
	return json.RawMessage(body), nil
}

func (p *statsProbe) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writeErr
}
