package mototest

import "syscall"

// childProcAttr makes the kernel SIGKILL moto_server when the thread that
// started it dies, which in a Go test binary means when the binary exits by
// any route: the shared server is never stopped otherwise. Go retires an OS
// thread only when a goroutine exits while locked to it, which the goroutine
// that starts the server (a test's) does not.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
