//go:build !amd64

package threadcpu

import "syscall"

const sysGetcpu = syscall.SYS_GETCPU
