package threadcpu

// sysGetcpu is getcpu(2)'s number on amd64 (arch/x86/entry/syscalls/syscall_64.tbl), which the syscall
// package does not export there.
const sysGetcpu = 309
