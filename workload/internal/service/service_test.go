package service

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func newTestServer(t *testing.T, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestEndpoints(t *testing.T) {
	_, ts := newTestServer(t, Options{Work: time.Millisecond, Alloc: 64 << 10, LiveMB: 1})
	tests := []struct {
		path       string
		wantStatus int
		wantBody   string
	}{
		{"/ping", 200, ""},
		{"/work", 200, "cpu_ms"},
		{"/work?work=2ms&alloc=4096", 200, "cpu_ms"},
		{"/work?work=0s&alloc=0", 200, "cpu_ms"},
		{"/work?work=abc", 400, "work="},
		{"/work?work=-1ms", 400, "work="},
		{"/work?work=2h", 400, "work="},
		{"/work?alloc=-1", 400, "alloc="},
		{"/work?alloc=1MiB", 400, "alloc="},
		{"/work?alloc=99999999999", 400, "alloc="},
		{"/nothing", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			status, body := get(t, ts.URL+tt.path)
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("GET %s = %d %q, want %d containing %q", tt.path, status, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}

func TestWorkBurnsTheRequestedCPU(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	_, body := get(t, ts.URL+"/work?work=10ms")
	var answer struct {
		CPUMs float64 `json:"cpu_ms"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.CPUMs < 10 || answer.CPUMs > 11 {
		t.Errorf("cpu_ms = %v, want 10..11", answer.CPUMs)
	}
}

func TestStatsCountsRequests(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	get(t, ts.URL+"/ping")
	get(t, ts.URL+"/work")
	get(t, ts.URL+"/work?work=bad") // rejected requests are not counted
	_, body := get(t, ts.URL+"/stats")
	var stats map[string]any
	if err := json.Unmarshal([]byte(body), &stats); err != nil {
		t.Fatalf("stats %q: %v", body, err)
	}
	for _, key := range []string{"cgroup", "gomaxprocs", "num_gc", "requests", "time_ns"} {
		if _, ok := stats[key]; !ok {
			t.Errorf("/stats lacks %q: %s", key, body)
		}
	}
	if stats["requests"] != 2.0 {
		t.Errorf("requests = %v, want 2", stats["requests"])
	}
}

func TestUpstreamCascade(t *testing.T) {
	up, upTS := newTestServer(t, Options{})
	_, down := newTestServer(t, Options{Upstream: upTS.URL})
	if status, _ := get(t, down.URL+"/work"); status != 200 {
		t.Errorf("with a healthy upstream: status %d", status)
	}
	if up.Requests() != 1 {
		t.Errorf("upstream served %d requests, want 1", up.Requests())
	}

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	_, viaFailing := newTestServer(t, Options{Upstream: failing.URL})
	if status, _ := get(t, viaFailing.URL+"/work"); status != http.StatusBadGateway {
		t.Errorf("with a failing upstream: status %d, want 502", status)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	_, viaGone := newTestServer(t, Options{Upstream: gone.URL, Timeout: time.Second})
	if status, _ := get(t, viaGone.URL+"/work"); status != http.StatusBadGateway {
		t.Errorf("with an unreachable upstream: status %d, want 502", status)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, opts := range []Options{
		{Work: -time.Millisecond}, {Alloc: -1}, {LiveMB: -1},
		{Upstream: "ftp://x"}, {Upstream: "127.0.0.1:80"},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("New(%+v): want error", opts)
		}
	}
}

func TestLiveHeapSize(t *testing.T) {
	if n := buildLiveHeap(2).count(); n != 2<<20/nodeBytes {
		t.Errorf("2 MiB heap has %d nodes", n)
	}
	if buildLiveHeap(0) != nil {
		t.Error("0 MiB heap is not empty")
	}
}
