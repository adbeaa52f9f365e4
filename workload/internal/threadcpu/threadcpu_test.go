package threadcpu

import (
	"runtime"
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

func TestCPUIsOneThisProcessMayRunOn(t *testing.T) {
	cpu, err := CPU()
	if err != nil {
		t.Fatal(err)
	}
	if cpu < 0 || cpu >= 1<<16 {
		t.Errorf("CPU() = %d", cpu)
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
	if sum := here.counts; len(sum) == 0 || here.Main() < 0 {
		t.Errorf("three readings on this thread: %+v", here)
	}
}
