package lambdatest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// emulatorProcAttr puts the emulator in its own process group (Stop kills
// the group: the emulator and the bootstrap it runs) and makes the kernel
// SIGKILL it if the test binary dies before its cleanups run (a -timeout
// panic, SIGKILL). The bootstrap then loses its Runtime API and exits.
func emulatorProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// descendants are the processes below pid (its children, theirs, ...),
// read from /proc: the bootstrap the emulator started, which the emulator
// puts in a process group of its own.
func descendants(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				out = append(out, child)
				out = append(out, descendants(child)...)
			}
		}
	}
	return out
}

// exited reports whether pid has ended (gone, or a zombie nobody reaped
// yet): it can write nothing more.
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) state ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}
