package lambdatest

import "syscall"

// emulatorProcAttr puts the emulator in its own process group (Stop kills
// the group: the emulator and the bootstrap it runs) and makes the kernel
// SIGKILL it if the test binary dies before its cleanups run (a -timeout
// panic, SIGKILL). The bootstrap then loses its Runtime API and exits.
func emulatorProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
