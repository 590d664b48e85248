package redistest

import "syscall"

// childProcAttr makes the kernel SIGKILL redis-server when the thread that
// started it dies, which in a Go test binary means when the binary exits by
// any route (including a -timeout panic or SIGKILL) that skips t.Cleanup.
// Go only retires an OS thread when a goroutine exits while locked to it, so
// servers must not be started from such a goroutine.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
