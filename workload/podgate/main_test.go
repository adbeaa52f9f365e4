package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type recorded struct {
	argv0 string
	argv  []string
}

func recorder(into *recorded) execFunc {
	return func(argv0 string, argv []string, _ []string) error {
		into.argv0, into.argv = argv0, argv
		return nil
	}
}

func TestUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"nothing", nil, 2},
		{"unknown", []string{"dance"}, 2},
		{"run without gate", []string{"run", "--", "/cpulab"}, 2},
		{"open without file", []string{"open"}, 2},
		{"open with a bad pair", []string{"open", "/tmp/x", "novalue"}, 2},
		{"bad signal", []string{"signal", "HUP"}, 2},
		{"KILL cannot reach PID 1 from inside", []string{"signal", "KILL"}, 2},
		{"cat nothing", []string{"cat"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			var rec recorded
			if got := dispatch(context.Background(), c.args, &out, &errOut, recorder(&rec)); got != c.want {
				t.Fatalf("exit %d, want %d (stderr %q)", got, c.want, errOut.String())
			}
			if rec.argv0 != "" {
				t.Fatalf("exec'd %q on a usage error", rec.argv0)
			}
		})
	}
}

func TestRunWaitsForTheGateThenExecs(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "app")
	var rec recorded
	done := make(chan int, 1)
	go func() {
		done <- dispatch(context.Background(), []string{"run", "-gate", gate, "--", "/cpulab", "burst", "-threads=8"},
			&bytes.Buffer{}, &bytes.Buffer{}, recorder(&rec))
	}()
	select {
	case code := <-done:
		t.Fatalf("returned %d before the gate opened", code)
	case <-time.After(150 * time.Millisecond):
	}
	if code := dispatch(context.Background(), []string{"open", gate}, &bytes.Buffer{}, &bytes.Buffer{}, nil); code != 0 {
		t.Fatalf("open: exit %d", code)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run: exit %d", code)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the gate opened but run did not exec within 3 s")
	}
	if rec.argv0 != "/cpulab" || strings.Join(rec.argv, " ") != "/cpulab burst -threads=8" {
		t.Fatalf("exec'd %q %q", rec.argv0, rec.argv)
	}
}

func TestRunStopsOnSignalBeforeTheGate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var rec recorded
	done := make(chan int, 1)
	go func() {
		done <- dispatch(ctx, []string{"run", "-gate", filepath.Join(t.TempDir(), "never"), "--", "/cpulab"},
			&bytes.Buffer{}, &bytes.Buffer{}, recorder(&rec))
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		if code != 0 || rec.argv0 != "" {
			t.Fatalf("exit %d, exec'd %q; want a clean stop without exec", code, rec.argv0)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("run ignored the stop")
	}
}

func TestCat(t *testing.T) {
	dir := t.TempDir()
	max := filepath.Join(dir, "cpu.max")
	if err := os.WriteFile(max, []byte("200000 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "cpu.weight")
	var out bytes.Buffer
	code := dispatch(context.Background(), []string{"cat", max, missing}, &out, &bytes.Buffer{}, nil)
	if code != 1 {
		t.Fatalf("exit %d with a missing file, want 1", code)
	}
	var got map[string]*string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output %q is not JSON: %v", out.String(), err)
	}
	if got[max] == nil || *got[max] != "200000 100000\n" || got[missing] != nil {
		t.Fatalf("got %v", got)
	}
}

func TestRunBindsValuesGivenWhenTheGateOpens(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "server")
	var rec recorded
	done := make(chan int, 1)
	go func() {
		done <- dispatch(context.Background(), []string{"run", "-gate", gate, "--", "/cpulab", "serve",
			"-upstream=http://{{serve:9000}}", "-work=5ms"}, &bytes.Buffer{}, &bytes.Buffer{}, recorder(&rec))
	}()
	time.Sleep(50 * time.Millisecond)
	if code := dispatch(context.Background(), []string{"open", gate, "serve:9000=10.244.1.7:9000"},
		&bytes.Buffer{}, &bytes.Buffer{}, nil); code != 0 {
		t.Fatalf("open: exit %d", code)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run: exit %d", code)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("run did not exec")
	}
	if got := strings.Join(rec.argv, " "); got != "/cpulab serve -upstream=http://10.244.1.7:9000 -work=5ms" {
		t.Fatalf("exec'd %q", got)
	}
}

func TestBindRefusesAMissingValue(t *testing.T) {
	cases := []struct {
		argv   []string
		values string
		want   string
		fails  bool
	}{
		{[]string{"a", "{{x}}/{{y}}"}, "x=1\ny=2\n", "a 1/2", false},
		{[]string{"plain"}, "", "plain", false},
		{[]string{"{{x}}"}, "y=2\n", "", true},
	}
	for _, c := range cases {
		got, err := bind(c.argv, c.values)
		if (err != nil) != c.fails || (!c.fails && strings.Join(got, " ") != c.want) {
			t.Fatalf("bind(%q, %q) = %q, %v", c.argv, c.values, got, err)
		}
	}
}
