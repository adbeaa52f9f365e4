package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

type sample struct {
	Type  string   `json:"type"`
	N     int      `json:"n"`
	LatMs *float64 `json:"lat_ms"`
}

func TestWriterWritesOneObjectPerLine(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, false)
	for i := 0; i < 3; i++ {
		if err := w.Write(sample{Type: "req", N: i, LatMs: Num(1.5)}); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() != 0 {
		t.Error("records reached the output before Flush without autoFlush")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"req","n":0,"lat_ms":1.5}` + "\n" +
		`{"type":"req","n":1,"lat_ms":1.5}` + "\n" +
		`{"type":"req","n":2,"lat_ms":1.5}` + "\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestAutoFlushWritesImmediately(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, true)
	if err := w.Write(map[string]any{"type": "listening", "addr": "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != `{"addr":"127.0.0.1:1","type":"listening"}`+"\n" {
		t.Errorf("got %q", got)
	}
}

func TestConcurrentWritesStayWholeLines(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, false)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				_ = w.Write(sample{Type: "req", N: i, LatMs: Num(float64(i))})
			}
		}()
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := 0
	scanner := bufio.NewScanner(&out)
	for scanner.Scan() {
		var s sample
		if err := json.Unmarshal(scanner.Bytes(), &s); err != nil || s.Type != "req" {
			t.Fatalf("bad line %q: %v", scanner.Text(), err)
		}
		lines++
	}
	if lines != 8*500 {
		t.Errorf("got %d lines, want %d", lines, 8*500)
	}
}

func TestNumTurnsNonFiniteIntoNull(t *testing.T) {
	b, err := json.Marshal([]*float64{Num(math.NaN()), Num(math.Inf(1)), Num(2.25)})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "[null,null,2.25]" {
		t.Errorf("got %s", b)
	}
}

func TestMsRoundsToTheMicrosecond(t *testing.T) {
	if got := Ms(1.23456789); got != 1.235 {
		t.Errorf("Ms = %v", got)
	}
}

func TestParamsWritesDurationsInMilliseconds(t *testing.T) {
	fs := flag.NewFlagSet("burst", flag.ContinueOnError)
	fs.Int("threads", 8, "")
	fs.Duration("work", 20*time.Millisecond, "")
	fs.String("label", "x", "")
	if err := fs.Parse([]string{"-work=1.5ms"}); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(Params(fs))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"label":"x","threads":8,"work":1.5}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestHeaderHasTheContractKeys(t *testing.T) {
	fs := flag.NewFlagSet("info", flag.ContinueOnError)
	h := NewHeader(Build{Version: "0.0.0", Variant: "dev"}, "info", fs)
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"type", "program", "version", "variant", "go_version", "gomaxprocs",
		"num_cpu", "env", "default_godebug", "cgroup", "command", "params", "pid", "time"} {
		if _, ok := m[key]; !ok {
			t.Errorf("header lacks %q", key)
		}
	}
	if m["type"] != "header" || m["program"] != "cpulab" {
		t.Errorf("header = %s", b)
	}
	if _, err := time.Parse(time.RFC3339, h.Time); err != nil {
		t.Errorf("time %q is not RFC 3339: %v", h.Time, err)
	}
	if env := m["env"].(map[string]any); !strings.Contains(string(b), `"GODEBUG"`) || env["GOMAXPROCS"] == nil {
		t.Errorf("env = %v", env)
	}
}
