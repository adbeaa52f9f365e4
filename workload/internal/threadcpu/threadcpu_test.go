package threadcpu

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNowAdvancesOnlyWithWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := Now()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // sleeping is not CPU time
	after, err := Now()
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 0 || d > 5*time.Millisecond {
		t.Errorf("thread CPU advanced %v across a 50ms sleep", d)
	}
}

func TestBurnConsumesRequestedCPU(t *testing.T) {
	for _, w := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		runtime.LockOSThread()
		before, _ := Now()
		used, err := Burn(w, nil)
		after, _ := Now()
		runtime.UnlockOSThread()
		if err != nil {
			t.Fatal(err)
		}
		if used < w || used > w+w/50+200*time.Microsecond {
			t.Errorf("Burn(%v) reported %v", w, used)
		}
		// An outside reading on the same thread agrees with Burn's own.
		if outside := after - before; outside < used {
			t.Errorf("Burn(%v): thread clock moved %v, less than reported %v", w, outside, used)
		}
	}
}

func TestBurnStopsEarly(t *testing.T) {
	used, err := Burn(time.Hour, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if used > 10*time.Millisecond {
		t.Errorf("Burn with stop returned after %v", used)
	}
}

func TestSpinRunsUntilStopped(t *testing.T) {
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		Spin(&stop)
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("Spin returned before stop was set")
	default:
	}
	stop.Store(true)
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Spin did not stop")
	}
}

// allowedCPUs is the calling process's affinity as the kernel states it (/proc/self/status,
// Cpus_allowed_list: "0-3,6").
func allowedCPUs(t *testing.T) map[int]bool {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		list, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		allowed := map[int]bool{}
		for _, part := range strings.Split(strings.TrimSpace(list), ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			if !isRange {
				hi = lo
			}
			first, err1 := strconv.Atoi(lo)
			last, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				t.Fatalf("Cpus_allowed_list %q", list)
			}
			for c := first; c <= last; c++ {
				allowed[c] = true
			}
		}
		return allowed
	}
	t.Skip("no Cpus_allowed_list in /proc/self/status")
	return nil
}

func TestCPUIsOneThisProcessMayRunOn(t *testing.T) {
	allowed := allowedCPUs(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := 0; i < 100; i++ {
		cpu, err := CPU()
		if err != nil {
			t.Fatal(err)
		}
		if !allowed[cpu] {
			t.Fatalf("CPU() = %d, not among the CPUs this process may run on %v", cpu, allowed)
		}
	}
}

func TestPlacementMainIsTheCPUOfMostReadings(t *testing.T) {
	var none Placement
	if got := none.Main(); got != -1 {
		t.Errorf("no readings: Main() = %d, want -1", got)
	}
	p := Placement{cpus: []int{3, 1, 0}, counts: []int{2, 5, 5}}
	if got := p.Main(); got != 1 {
		t.Errorf("Main() = %d, want 1 (the first seen of the two tied at 5)", got)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var here Placement
	for i := 0; i < 3; i++ {
		here.Sample()
	}
	if main := here.Main(); !allowedCPUs(t)[main] {
		t.Errorf("three readings on this thread: Main() = %d (%+v)", main, here)
	}
}

func TestAllowedIsTheProcessAffinityAndPinHoldsTheThreadThere(t *testing.T) {
	allowed := allowedCPUs(t)
	failed := make(chan string, 1)
	go func() {
		// locked and never unlocked: the thread ends with the goroutine, so no pinned thread returns to the runtime
		runtime.LockOSThread()
		failed <- pinEach(allowed)
	}()
	if msg := <-failed; msg != "" {
		t.Fatal(msg)
	}
	if err := Pin(-1); err == nil {
		t.Fatal("Pin(-1) succeeded")
	}
}

// pinEach pins the calling (locked) thread to each CPU Allowed gives in turn and burns there: "" when
// Allowed agrees with the process's affinity and every burn ran on its CPU.
func pinEach(allowed map[int]bool) string {
	got, err := Allowed()
	if err != nil {
		return err.Error()
	}
	if len(got) != len(allowed) {
		return fmt.Sprintf("Allowed() = %v, /proc/self/status says %v", got, allowed)
	}
	for _, cpu := range got {
		if !allowed[cpu] {
			return fmt.Sprintf("Allowed() = %v holds %d, not in %v", got, cpu, allowed)
		}
		if err := Pin(cpu); err != nil {
			return err.Error()
		}
		now, err := Allowed()
		if err != nil || len(now) != 1 || now[0] != cpu {
			return fmt.Sprintf("after Pin(%d) the thread may run on %v (%v)", cpu, now, err)
		}
		var where Placement
		if _, err := Burn(2*time.Millisecond, func() bool { where.Sample(); return false }); err != nil {
			return err.Error()
		}
		if where.Main() != cpu {
			return fmt.Sprintf("pinned to %d, the burn ran mainly on %d", cpu, where.Main())
		}
	}
	return ""
}
