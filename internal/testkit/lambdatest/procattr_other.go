//go:build !linux

package lambdatest

import "syscall"

// emulatorProcAttr puts the emulator in its own process group; only Linux
// can also tie its life to the test binary's.
func emulatorProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// descendants finds no process outside Linux: Stop then kills the
// emulator's group only.
func descendants(int) []int { return nil }

// exited is true outside Linux, where descendants finds none.
func exited(int) bool { return true }
