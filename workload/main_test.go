package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cpulab/internal/cgroup"
	"cpulab/internal/threadcpu"
)

// useFixtureCgroup points the cgroup reader at a v2 fixture tree, so the
// tests do not depend on the machine's cgroups.
func useFixtureCgroup(t *testing.T) {
	dir := filepath.Join("internal", "cgroup", "testdata", "v2-limited")
	t.Setenv(cgroup.EnvRoot, filepath.Join(dir, "root"))
	t.Setenv(cgroup.EnvProcCgroup, filepath.Join(dir, "proc_cgroup"))
}

func runCLI(t *testing.T, ctx context.Context, args ...string) (int, []map[string]any, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := dispatch(ctx, args, &stdout, &stderr)
	return code, decodeLines(t, &stdout), stderr.String()
}

func decodeLines(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var recs []map[string]any
	scanner := bufio.NewScanner(r)
	for scanner.Scan() {
		var m map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &m); err != nil {
			t.Fatalf("stdout line %q is not JSON: %v", scanner.Text(), err)
		}
		recs = append(recs, m)
	}
	return recs
}

func TestBadInputExitsTwoNamingTheProblem(t *testing.T) {
	tests := []struct {
		args       []string
		wantStderr string
	}{
		{nil, "usage: cpulab"},
		{[]string{"frobnicate"}, `unknown subcommand "frobnicate"`},
		{[]string{"info", "-nope"}, "flag provided but not defined: -nope"},
		{[]string{"info", "stray"}, `unexpected argument "stray"`},
		{[]string{"burst", "-threads=0"}, "-threads"},
		{[]string{"burst", "-work=-5ms"}, "-work"},
		{[]string{"burst", "-interval=0s"}, "-interval"},
		{[]string{"burst", "-rounds=0"}, "-rounds"},
		{[]string{"burst", "-work=abc"}, "invalid value"},
		{[]string{"spin", "-threads=-1"}, "-threads"},
		{[]string{"spin", "-report=0s"}, "-report"},
		{[]string{"spin", "-duration=-1s"}, "-duration"},
		{[]string{"serve", "-work=-1ms"}, "-work"},
		{[]string{"serve", "-alloc=-1"}, "-alloc"},
		{[]string{"serve", "-live-mb=-1"}, "-live-mb"},
		{[]string{"serve", "-addr=nonsense"}, "-addr"},
		{[]string{"serve", "-upstream=localhost:80"}, "-upstream"},
		{[]string{"load"}, "-target"},
		{[]string{"load", "-target=http://127.0.0.1:1", "-rps=0"}, "-rps"},
		{[]string{"load", "-target=http://127.0.0.1:1", "-rps=-3"}, "-rps"},
		{[]string{"load", "-target=http://127.0.0.1:1", "-clump=0"}, "-clump"},
		{[]string{"load", "-target=http://127.0.0.1:1", "-ping-rps=-1"}, "-ping-rps"},
		{[]string{"load", "-target=http://127.0.0.1:1", "-duration=0s"}, "-duration"},
		{[]string{"load", "-target=http://127.0.0.1:1", "-warmup=-1s"}, "-warmup"},
		{[]string{"load", "-target=http://127.0.0.1:1", "-timeout=0s"}, "-timeout"},
		{[]string{"load", "-target=http://127.0.0.1:1", "-closed", "-workers=0"}, "-workers"},
		{[]string{"load", "-target=https://example.com:443"}, "-target"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, recs, stderr := runCLI(t, context.Background(), tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr %q does not mention %q", stderr, tt.wantStderr)
			}
			if len(recs) != 0 {
				t.Errorf("bad input still wrote records: %v", recs)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"burst", "-h"}} {
		if code, _, _ := runCLI(t, context.Background(), args...); code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
	}
}

func TestInfoWritesHeaderAndSummary(t *testing.T) {
	useFixtureCgroup(t)
	code, recs, _ := runCLI(t, context.Background(), "info")
	if code != 0 || len(recs) != 2 {
		t.Fatalf("exit %d, records %v", code, recs)
	}
	header, summary := recs[0], recs[1]
	if header["type"] != "header" || header["command"] != "info" || header["variant"] != "dev" {
		t.Errorf("header %v", header)
	}
	cg := summary["cgroup"].(map[string]any)
	if summary["type"] != "summary" || cg["quota_us"] != 200000.0 || cg["weight"] != 59.0 {
		t.Errorf("summary %v", summary)
	}
}

func TestBurstWritesOneRecordPerRound(t *testing.T) {
	useFixtureCgroup(t)
	code, recs, stderr := runCLI(t, context.Background(),
		"burst", "-threads=2", "-work=2ms", "-interval=20ms", "-rounds=3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(recs) != 5 {
		t.Fatalf("want header, 3 rounds, summary; got %d records", len(recs))
	}
	params := recs[0]["params"].(map[string]any)
	if params["work"] != 2.0 || params["interval"] != 20.0 || params["threads"] != 2.0 {
		t.Errorf("params %v (durations must be in ms)", params)
	}
	for i, r := range recs[1:4] {
		cpu := r["thread_cpu_ms"].(float64)
		if r["type"] != "round" || r["round"] != float64(i) || cpu < 2 || cpu > 2.2 {
			t.Errorf("round record %v", r)
		}
		if r["d_nr_periods"] != 0.0 { // a fixture file does not change
			t.Errorf("delta of an unchanged counter: %v", r["d_nr_periods"])
		}
	}
	summary := recs[4]
	if summary["type"] != "summary" || summary["rounds"] != 3.0 || summary["elapsed_s"].(float64) < 0.06 {
		t.Errorf("summary %v", summary)
	}
}

func TestBurstSpreadPutsEachThreadOnItsOwnCPU(t *testing.T) {
	useFixtureCgroup(t)
	allowed, err := threadcpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	threads := min(len(allowed), 4)
	code, recs, stderr := runCLI(t, context.Background(),
		"burst", fmt.Sprintf("-threads=%d", threads), "-work=3ms", "-interval=20ms", "-rounds=5", "-spread")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, r := range recs[1:6] {
		if r["type"] != "round" || r["thread_cpus"] != float64(threads) {
			t.Errorf("%d threads spread over %v: round %v", threads, allowed, r)
		}
	}
	// the pins ended with the burners: this thread may still run anywhere it could
	after, err := threadcpu.Allowed()
	if err != nil || len(after) != len(allowed) {
		t.Errorf("after the burst a thread may run on %v (%v), before on %v", after, err, allowed)
	}
}

func TestBurnerPoolPinsEachThreadWhereItIsTold(t *testing.T) {
	// two busy threads on a host of two CPUs or more run on two of them unless something holds them: pinned
	// both to one CPU they report one, whatever the scheduler would do
	allowed, err := threadcpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("one CPU (%v): two threads share it pinned or not", allowed)
	}
	last := allowed[len(allowed)-1]
	for _, tc := range []struct {
		cpus []int
		want int
	}{{[]int{last, last}, 1}, {allowed[:2], 2}} {
		pool, err := newBurnerPool(2, tc.cpus)
		if err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 3; round++ {
			if _, cpus, err := pool.burnAll(5 * time.Millisecond); err != nil || cpus != tc.want {
				t.Errorf("threads pinned to %v: round %d ran on %d CPUs (%v), want %d", tc.cpus, round, cpus, err, tc.want)
			}
		}
		pool.close()
	}
}

func TestAlignedStartIsTheNextGridPointPlusTheOffset(t *testing.T) {
	interval := 433 * time.Millisecond
	for _, tc := range []struct {
		now, offset, want int64 // ms since the Unix epoch
	}{
		{now: 1000, offset: 0, want: 1299},   // grid 866, 1299, ...
		{now: 1299, offset: 0, want: 1299},   // on a grid point: now
		{now: 1000, offset: 216, want: 1082}, // 866 + 216
		{now: 1100, offset: 216, want: 1515}, // 1082 is past: the next one
	} {
		got := alignedStart(time.UnixMilli(tc.now), interval, time.Duration(tc.offset)*time.Millisecond)
		if got.UnixMilli() != tc.want {
			t.Errorf("alignedStart(%d ms, offset %d ms) = %d ms, want %d", tc.now, tc.offset, got.UnixMilli(), tc.want)
		}
	}
}

func TestBurstAlignedStartsOnTheGrid(t *testing.T) {
	useFixtureCgroup(t)
	code, recs, stderr := runCLI(t, context.Background(),
		"burst", "-threads=1", "-work=1ms", "-interval=50ms", "-rounds=2", "-align", "-offset=10ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(recs) != 4 || recs[0]["params"].(map[string]any)["offset"] != 10.0 {
		t.Fatalf("want header (offset in ms), 2 rounds, summary; got %v", recs)
	}
	if code, _, stderr := runCLI(t, context.Background(), "burst", "-interval=50ms", "-align", "-offset=50ms"); code == 0 {
		t.Errorf("an offset of a whole interval must be refused (%s)", stderr)
	}
}

func TestSpinStopsAfterDurationWithSummary(t *testing.T) {
	useFixtureCgroup(t)
	start := time.Now()
	code, recs, stderr := runCLI(t, context.Background(), "spin", "-threads=1", "-report=100ms", "-duration=350ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("spin took %v", took)
	}
	reports := 0
	for _, r := range recs {
		if r["type"] == "report" {
			reports++
		}
	}
	if reports != 3 || recs[len(recs)-1]["type"] != "summary" {
		t.Errorf("%d reports, last %v", reports, recs[len(recs)-1])
	}
}

func TestSpinUntilSignalStillWritesSummary(t *testing.T) {
	useFixtureCgroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	code, recs, _ := runCLI(t, ctx, "spin", "-threads=1", "-report=1s")
	if code != 0 || recs[len(recs)-1]["type"] != "summary" {
		t.Errorf("exit %d, records %v", code, recs)
	}
}

func TestServeAndLoadEndToEnd(t *testing.T) {
	useFixtureCgroup(t)
	ctx, stopServe := context.WithCancel(context.Background())
	serveOut, serveWriter := io.Pipe()
	served := make(chan int, 1)
	go func() {
		code := dispatch(ctx, []string{"serve", "-addr=127.0.0.1:0", "-work=1ms", "-live-mb=1"}, serveWriter, io.Discard)
		serveWriter.Close()
		served <- code
	}()
	lines := bufio.NewScanner(serveOut)
	var addr string
	for addr == "" && lines.Scan() {
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m["type"] == "listening" {
			addr = m["addr"].(string)
		}
	}
	if addr == "" {
		t.Fatal("serve wrote no listening record")
	}

	code, recs, stderr := runCLI(t, context.Background(), "load", "-target=http://"+addr,
		"-rps=100", "-clump=2", "-ping-rps=20", "-duration=800ms", "-warmup=200ms", "-label=e2e")
	if code != 0 {
		t.Fatalf("load exit %d: %s", code, stderr)
	}
	summary := recs[len(recs)-1]
	work := summary["work"].(map[string]any)
	if summary["type"] != "summary" || work["errors"] != 0.0 || work["sent"].(float64) < 40 {
		t.Errorf("load summary %v", summary)
	}
	if recs[0]["params"].(map[string]any)["label"] != "e2e" {
		t.Errorf("label missing from params: %v", recs[0]["params"])
	}

	stopServe() // what SIGTERM does
	var last map[string]any
	for lines.Scan() {
		_ = json.Unmarshal(lines.Bytes(), &last)
	}
	if code := <-served; code != 0 {
		t.Errorf("serve exit %d", code)
	}
	if last["type"] != "summary" || last["requests"].(float64) < 40 {
		t.Errorf("serve summary %v", last)
	}
}
