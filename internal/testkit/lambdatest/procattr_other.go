//go:build !linux

package lambdatest

import "syscall"

// emulatorProcAttr puts the emulator in its own process group; only Linux
// can also tie its life to the test binary's.
func emulatorProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
