package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"cpulab/internal/cgroup"
	"cpulab/internal/record"
	"cpulab/internal/service"
)

// listeningRecord says the socket is bound, and where (port 0 picks one).
type listeningRecord struct {
	Type string `json:"type"`
	Addr string `json:"addr"`
}

type serveSummary struct {
	Type     string        `json:"type"`
	Requests int64         `json:"requests"`
	NumGC    uint64        `json:"num_gc"`
	Cgroup   cgroup.Record `json:"cgroup"`
}

// shutdownGrace bounds how long in-flight requests may finish after a signal.
const shutdownGrace = 10 * time.Second

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var opts service.Options
	var addr string
	fs := newFlagSet("serve", "HTTP service: /work allocates and drops -alloc bytes and burns -work of CPU\n"+
		"(?work=<duration>&alloc=<bytes> override per request), /ping, /stats (JSON).\n"+
		"Runs until SIGTERM or SIGINT, then writes a summary.", stderr)
	fs.StringVar(&addr, "addr", "127.0.0.1:8080", "listen address (port 0 picks a free port; see the listening record)")
	fs.DurationVar(&opts.Work, "work", 5*time.Millisecond, "CPU time burned per /work request")
	fs.Int64Var(&opts.Alloc, "alloc", 1<<20, "bytes allocated and dropped per /work request")
	fs.IntVar(&opts.LiveMB, "live-mb", 64, "MiB of pointer-holding objects kept alive for the GC")
	fs.StringVar(&opts.Upstream, "upstream", "", "base URL (http://host:port) whose /work each /work also calls; 502 if it fails")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := validateServe(addr, opts); err != nil {
		return err
	}
	srv, err := service.New(opts)
	if err != nil {
		return err
	}
	out := record.NewWriter(stdout, true)
	if err := out.Write(record.NewHeader(buildInfo(), "serve", fs)); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if err := out.Write(listeningRecord{Type: "listening", Addr: ln.Addr().String()}); err != nil {
		ln.Close()
		return err
	}

	httpServer := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- httpServer.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := httpServer.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	summary := serveSummary{Type: "summary", Requests: srv.Requests(), NumGC: service.NumGC(), Cgroup: cgroup.Read()}
	if err := out.Write(summary); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "serve: %d requests, %d GC cycles\n", summary.Requests, summary.NumGC)
	return nil
}

func validateServe(addr string, o service.Options) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return badFlag("addr", "want host:port, got %q", addr)
	}
	if o.Work < 0 || o.Work > service.MaxWork {
		return badFlag("work", "must be between 0 and %v, got %v", service.MaxWork, o.Work)
	}
	if o.Alloc < 0 || o.Alloc > service.MaxAlloc {
		return badFlag("alloc", "must be between 0 and %d bytes, got %d", service.MaxAlloc, o.Alloc)
	}
	if o.LiveMB < 0 {
		return badFlag("live-mb", "must be 0 or positive, got %d", o.LiveMB)
	}
	if err := service.CheckUpstream(o.Upstream); err != nil {
		return badFlag("upstream", "%v", err)
	}
	return nil
}
