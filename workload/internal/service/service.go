// Package service is the HTTP service that `cpulab serve` runs: /work burns
// CPU and allocates, /ping does nothing, /stats reports cgroup CPU counters.
package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"cpulab/internal/cgroup"
	"cpulab/internal/threadcpu"
)

// Limits on per-request overrides: a request cannot make the service burn
// or hold more than this, so a typo cannot wedge an experiment.
const (
	MaxWork  = time.Minute
	MaxAlloc = 1 << 30
)

// Options configure the service.
type Options struct {
	Work     time.Duration // CPU time burned per /work request
	Alloc    int64         // bytes allocated and dropped per /work request
	LiveMB   int           // MiB of pointer-holding objects kept alive for the GC to scan
	Upstream string        // base URL whose /work every /work calls; "" for none
	Timeout  time.Duration // client timeout for upstream calls
}

// Server handles /work, /ping and /stats.
type Server struct {
	opts     Options
	live     *heapNode
	requests atomic.Int64
	upstream *http.Client
	mux      *http.ServeMux
}

// New validates opts, builds the live heap and returns the server.
func New(opts Options) (*Server, error) {
	if opts.Work < 0 || opts.Work > MaxWork {
		return nil, fmt.Errorf("work must be between 0 and %v, got %v", MaxWork, opts.Work)
	}
	if opts.Alloc < 0 || opts.Alloc > MaxAlloc {
		return nil, fmt.Errorf("alloc must be between 0 and %d bytes, got %d", MaxAlloc, opts.Alloc)
	}
	if opts.LiveMB < 0 {
		return nil, fmt.Errorf("live heap must be >= 0 MiB, got %d", opts.LiveMB)
	}
	if err := CheckUpstream(opts.Upstream); err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	opts.Upstream = strings.TrimRight(opts.Upstream, "/")
	s := &Server{
		opts: opts,
		live: buildLiveHeap(opts.LiveMB),
		// Proxy is nil on purpose: upstream calls go straight to the given URL.
		upstream: &http.Client{Timeout: opts.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1024}},
		mux:      http.NewServeMux(),
	}
	s.mux.HandleFunc("/work", s.handleWork)
	s.mux.HandleFunc("/ping", s.handlePing)
	s.mux.HandleFunc("/stats", s.handleStats)
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Requests is the number of /work and /ping requests answered so far.
func (s *Server) Requests() int64 { return s.requests.Load() }

// LiveObjects is the number of objects in the live heap (for tests).
func (s *Server) LiveObjects() int { return s.live.count() }

func (s *Server) handlePing(w http.ResponseWriter, _ *http.Request) {
	s.requests.Add(1)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleWork(w http.ResponseWriter, r *http.Request) {
	work, alloc, err := s.workParams(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	allocateAndDrop(alloc)
	used, err := threadcpu.Burn(work, nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if s.opts.Upstream != "" {
		if err := s.callUpstream(r); err != nil {
			http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	s.requests.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, "{\"cpu_ms\":%.3f}\n", float64(used)/float64(time.Millisecond))
}

// workParams reads the optional per-request overrides ?work=<Go duration>
// and ?alloc=<bytes>.
func (s *Server) workParams(q url.Values) (time.Duration, int64, error) {
	work, alloc := s.opts.Work, s.opts.Alloc
	if v := q.Get("work"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxWork {
			return 0, 0, fmt.Errorf("work=%q: want a Go duration between 0 and %v", v, MaxWork)
		}
		work = d
	}
	if v := q.Get("alloc"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > MaxAlloc {
			return 0, 0, fmt.Errorf("alloc=%q: want bytes between 0 and %d", v, MaxAlloc)
		}
		alloc = n
	}
	return work, alloc, nil
}

func (s *Server) callUpstream(r *http.Request) error {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, s.opts.Upstream+"/work", nil)
	if err != nil {
		return err
	}
	resp, err := s.upstream.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body) // drain so the connection is reused
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// Stats is the /stats answer.
type Stats struct {
	Cgroup     cgroup.Record `json:"cgroup"`
	GOMAXPROCS int           `json:"gomaxprocs"`
	NumGC      uint64        `json:"num_gc"`
	Requests   int64         `json:"requests"`
	TimeNs     int64         `json:"time_ns"`
}

// Snapshot reads the current stats.
func (s *Server) Snapshot() Stats {
	return Stats{
		Cgroup:     cgroup.Read(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		NumGC:      NumGC(),
		Requests:   s.Requests(),
		TimeNs:     time.Now().UnixNano(),
	}
}

func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Snapshot())
}

// NumGC is the number of completed GC cycles, read through runtime/metrics
// because runtime.ReadMemStats stops the world.
func NumGC() uint64 {
	sample := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// CheckUpstream accepts "" (no upstream) or a plain http base URL.
func CheckUpstream(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" || u.Host == "" {
		return errors.New("want http://host:port, got " + strconv.Quote(raw))
	}
	return nil
}
