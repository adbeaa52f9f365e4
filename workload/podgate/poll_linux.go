package main

import (
	"syscall"
	"unsafe"
)

// pollFd is struct pollfd of poll(2).
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const pollIn = 0x1

// poll waits up to timeoutMs for an event on fds (ppoll(2); the syscall package has no poll wrapper).
func poll(fds []pollFd, timeoutMs int) (int, error) {
	ts := syscall.NsecToTimespec(int64(timeoutMs) * 1e6)
	n, _, errno := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}
