package lambdatest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// KillFunction kills the function's process (the bootstrap the emulator
// runs) with SIGKILL, as a crash or Lambda ending an instance mid-request
// would, and returns once it has died: its handler gets no chance to run
// another line. The emulator starts the bootstrap in a process group of its
// own, which Stop does not reach: a bootstrap left alone finishes the
// invocation it is in before it notices its emulator is gone. It reads the
// emulator's children from /proc (Linux), and skips t elsewhere.
func (r *RIE) KillFunction(t testing.TB) {
	t.Helper()
	if r.cmd.Process == nil {
		t.Fatal("kill function: the emulator is not running")
	}
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(r.cmd.Process.Pid), "task", "*", "children"))
	if err != nil || len(tasks) == 0 {
		t.Skipf("kill function: no /proc children of the emulator (%v): not Linux?", err)
	}
	var pids []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	if len(pids) == 0 {
		t.Fatal("kill function: the emulator runs no function process (no invocation yet?)")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("kill function process %d: %v", pid, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("kill function: process %d still alive after SIGKILL", pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// alive reports whether pid is a process that has not died (a zombie,
// dead and not yet reaped by the emulator, counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}
