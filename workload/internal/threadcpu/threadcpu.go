// Package threadcpu measures and burns CPU time of the calling OS thread, so
// that time a thread spends paused (CFS throttling, preemption) never counts
// as work done.
//
// The clock is clock_gettime(CLOCK_THREAD_CPUTIME_ID), called as a raw
// syscall, not getrusage(RUSAGE_THREAD): on the kernels we run, RUSAGE_THREAD
// advances in scheduler ticks (4 ms steps at HZ=250, measured), far too
// coarse to burn 5 ms within 2%. The thread CPU clock is exact to the
// nanosecond and costs about 0.2 µs per call.
package threadcpu

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPUTimeID is CLOCK_THREAD_CPUTIME_ID from <time.h>; the syscall
// package does not export it.
const clockThreadCPUTimeID = 3

// Now returns the CPU time consumed so far by the calling OS thread. The
// caller must have locked its goroutine to the thread (runtime.LockOSThread),
// otherwise successive readings may come from different threads.
func Now() (time.Duration, error) {
	var ts syscall.Timespec
	_, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID,
		uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("clock_gettime(CLOCK_THREAD_CPUTIME_ID): %w", errno)
	}
	return time.Duration(ts.Nano()), nil
}

// CPU returns the CPU the calling thread runs on now (getcpu(2), a raw syscall: about 0.1 µs).
func CPU() (int, error) {
	var cpu uint32
	_, _, errno := syscall.RawSyscall(sysGetcpu, uintptr(unsafe.Pointer(&cpu)), 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("getcpu: %w", errno)
	}
	return int(cpu), nil
}

// cpuMask is a kernel CPU set (cpu_set_t) of maskCPUs CPUs, as sched_getaffinity(2) and sched_setaffinity(2) take it.
type cpuMask [16]uint64

// maskCPUs is how many CPUs a cpuMask holds.
const maskCPUs = len(cpuMask{}) * 64

// Allowed returns the CPUs the calling thread may run on (sched_getaffinity(2) of thread 0: itself), in order.
func Allowed() ([]int, error) {
	var set cpuMask
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set)))
	if errno != 0 {
		return nil, fmt.Errorf("sched_getaffinity: %w", errno)
	}
	var cpus []int
	for cpu := 0; cpu < maskCPUs; cpu++ {
		if set[cpu/64]&(1<<(cpu%64)) != 0 {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}

// Pin keeps the calling OS thread on one CPU (sched_setaffinity(2) of thread 0: itself). The caller must
// have locked its goroutine to the thread (runtime.LockOSThread) for as long as the pin should hold: the
// Go runtime starts new threads from a template thread, never from a locked one, so no other thread
// inherits the pin.
func Pin(cpu int) error {
	if cpu < 0 || cpu >= maskCPUs {
		return fmt.Errorf("sched_setaffinity: CPU %d outside 0-%d", cpu, maskCPUs-1)
	}
	var set cpuMask
	set[cpu/64] |= 1 << (cpu % 64)
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set)))
	if errno != 0 {
		return fmt.Errorf("sched_setaffinity to CPU %d: %w", cpu, errno)
	}
	return nil
}

// Placement counts where a thread ran, one getcpu reading at a time.
type Placement struct {
	cpus   []int // the CPUs seen, in the order first seen
	counts []int // readings on each of them
}

// Sample adds one reading of the calling thread's CPU; a failed reading adds nothing.
func (p *Placement) Sample() {
	cpu, err := CPU()
	if err != nil {
		return
	}
	for i, c := range p.cpus {
		if c == cpu {
			p.counts[i]++
			return
		}
	}
	p.cpus = append(p.cpus, cpu)
	p.counts = append(p.counts, 1)
}

// Main is the CPU of most readings (the first seen of those tied), or -1 with none.
func (p *Placement) Main() int {
	main, most := -1, 0
	for i, n := range p.counts {
		if n > most {
			main, most = p.cpus[i], n
		}
	}
	return main
}

// spinChunk is the busy work done between clock readings: a few µs, small
// against the 2% target for 5 ms (100 µs) yet large against the cost of one
// reading.
const spinChunk = 2000

// sink keeps the compiler from removing the busy loop.
var sink atomic.Uint64

// Burn keeps the calling goroutine busy, locked to its OS thread, until that
// thread has consumed w of CPU time, and returns the CPU time it consumed.
// stop, when non-nil, ends the burn early once it returns true.
func Burn(w time.Duration, stop func() bool) (time.Duration, error) {
	runtime.LockOSThread() // nests with a caller's lock
	defer runtime.UnlockOSThread()
	start, err := Now()
	if err != nil {
		return 0, err
	}
	x := uint64(start) | 1
	for {
		for i := 0; i < spinChunk; i++ {
			x ^= x << 13 // xorshift: cheap, and data-dependent so not folded away
			x ^= x >> 7
			x ^= x << 17
		}
		now, err := Now()
		if err != nil {
			return 0, err
		}
		if used := now - start; used >= w || (stop != nil && stop()) {
			sink.Store(x)
			return used, nil
		}
	}
}

// Spin keeps the calling goroutine busy, locked to its OS thread, until stop
// is set. Unlike Burn it reads no clock, so all its time is user time.
func Spin(stop *atomic.Bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	x := uint64(1)
	for !stop.Load() {
		for i := 0; i < spinChunk; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	sink.Store(x)
}
