package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run podgate as a process of its own: with PODGATE_TEST_MAIN=1 the test
// binary is podgate. The variable is dropped first, so the program podgate execs (this binary
// again) is the test binary.
func TestMain(m *testing.M) {
	if os.Getenv("PODGATE_TEST_MAIN") == "1" {
		os.Unsetenv("PODGATE_TEST_MAIN")
		main()
	}
	os.Exit(m.Run())
}

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

// runInBackground dispatches args in a goroutine, recording what it would exec; the channel
// receives its exit code.
func runInBackground(ctx context.Context, args []string, rec *recorded) <-chan int {
	done := make(chan int, 1)
	go func() { done <- dispatch(ctx, args, &bytes.Buffer{}, &bytes.Buffer{}, recorder(rec)) }()
	return done
}

// exitWithin3s is the exit code a background run sends within 3 s; the test fails with why when
// none comes.
func exitWithin3s(t *testing.T, done <-chan int, why string) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(3 * time.Second):
		t.Fatal(why)
		return 0
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
	done := runInBackground(context.Background(), []string{"run", "-gate", gate, "--", "/cpulab", "burst", "-threads=8"}, &rec)
	select {
	case code := <-done:
		t.Fatalf("returned %d before the gate opened", code)
	case <-time.After(150 * time.Millisecond):
	}
	if code := dispatch(context.Background(), []string{"open", gate}, &bytes.Buffer{}, &bytes.Buffer{}, nil); code != 0 {
		t.Fatalf("open: exit %d", code)
	}
	if code := exitWithin3s(t, done, "the gate opened but run did not exec within 3 s"); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	if rec.argv0 != "/cpulab" || strings.Join(rec.argv, " ") != "/cpulab burst -threads=8" {
		t.Fatalf("exec'd %q %q", rec.argv0, rec.argv)
	}
}

func TestRunStopsOnSignalBeforeTheGate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var rec recorded
	done := runInBackground(ctx, []string{"run", "-gate", filepath.Join(t.TempDir(), "never"), "--", "/cpulab"}, &rec)
	time.Sleep(50 * time.Millisecond)
	cancel()
	if code := exitWithin3s(t, done, "run ignored the stop"); code != 0 || rec.argv0 != "" {
		t.Fatalf("exit %d, exec'd %q; want a clean stop without exec", code, rec.argv0)
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
	done := runInBackground(context.Background(), []string{"run", "-gate", gate, "--", "/cpulab", "serve",
		"-upstream=http://{{serve:9000}}", "-work=5ms"}, &rec)
	time.Sleep(50 * time.Millisecond)
	if code := dispatch(context.Background(), []string{"open", gate, "serve:9000=10.244.1.7:9000"},
		&bytes.Buffer{}, &bytes.Buffer{}, nil); code != 0 {
		t.Fatalf("open: exit %d", code)
	}
	if code := exitWithin3s(t, done, "run did not exec"); code != 0 {
		t.Fatalf("run: exit %d", code)
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

// startWaiting starts `podgate run -gate GATE -- <this binary> -test.run=^$` as a process and
// returns once it waits at its gate (its inotify watch is set, as /proc/PID/fdinfo shows).
func startWaiting(t *testing.T, gate string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "run", "-gate", gate, "--", self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "PODGATE_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !watching(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("podgate (pid %d) set no inotify watch within 10 s; stderr %q", cmd.Process.Pid, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, &stdout, &stderr
}

// watching: whether the process holds an inotify descriptor with a watch.
func watching(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fdinfo"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		info, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil && strings.Contains(string(info), "inotify wd:") {
			return true
		}
	}
	return false
}

// switches: the context switches (voluntary + involuntary) of each thread of the process, by thread id.
func switches(t *testing.T, pid int) map[string]int {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, task := range tasks {
		status, err := os.ReadFile(filepath.Join(dir, task.Name(), "status"))
		if err != nil {
			continue // the thread just ended
		}
		for _, line := range strings.Split(string(status), "\n") {
			key, value, ok := strings.Cut(line, ":")
			if ok && strings.HasSuffix(key, "ctxt_switches") {
				n, _ := strconv.Atoi(strings.TrimSpace(value))
				out[task.Name()] += n
			}
		}
	}
	return out
}

// cpuTicks: the process's user + system CPU time in clock ticks (/proc/PID/stat), its ended threads included.
func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	utime, _ := strconv.Atoi(fields[11]) // field 14 of stat(5); fields[0] is field 3, the state
	stime, _ := strconv.Atoi(fields[12])
	return utime + stime
}

// A podgate waiting at its gate wakes up for nothing: over two seconds its threads do not run
// (a context switch is counted each time a thread goes back to sleep), and it uses no CPU. A
// timer or a poll would show here: the 200 ms poll podgate once had woke it ten times.
func TestWaitingAtTheGateMakesNoWakeUps(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "app")
	cmd, stdout, stderr := startWaiting(t, gate)
	pid := cmd.Process.Pid
	before, cpuBefore := switches(t, pid), cpuTicks(t, pid)
	time.Sleep(2 * time.Second) // the measured window, not a synchronisation
	after, cpuAfter := switches(t, pid), cpuTicks(t, pid)
	woke := 0
	for tid, n := range after {
		woke += n - before[tid] // a thread born meanwhile counts all of its switches
	}
	t.Logf("at the gate for 2 s: %d context switches, %d clock ticks of CPU", woke, cpuAfter-cpuBefore)
	if woke > 2 {
		t.Errorf("%d context switches in 2 s at the gate (by thread: before %v, after %v); want none", woke, before, after)
	}
	if cpuAfter-cpuBefore > 1 {
		t.Errorf("%d clock ticks of CPU in 2 s at the gate; want none", cpuAfter-cpuBefore)
	}
	// and the gate still opens: podgate execs the program (this binary, running no test)
	if code := dispatch(context.Background(), []string{"open", gate}, &bytes.Buffer{}, &bytes.Buffer{}, nil); code != 0 {
		t.Fatalf("open: exit %d", code)
	}
	if err := waitExit(cmd, 10*time.Second); err != nil {
		t.Fatalf("after the gate opened: %v; stderr %q", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "PASS") {
		t.Fatalf("the program did not run after the gate opened: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

// SIGTERM (kubelet stopping the pod) ends a waiting podgate at once and cleanly, without running the program.
func TestWaitingEndsOnSIGTERM(t *testing.T) {
	cmd, stdout, stderr := startWaiting(t, filepath.Join(t.TempDir(), "app"))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(cmd, 3*time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v; stderr %q", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped before the gate opened") || stdout.Len() != 0 {
		t.Fatalf("stdout %q, stderr %q; want a clean stop before the gate", stdout.String(), stderr.String())
	}
}

// waitExit waits for the process to end with exit status 0 within the timeout.
func waitExit(cmd *exec.Cmd, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return errors.New("still running after " + timeout.String())
	}
}
