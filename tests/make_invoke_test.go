package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMakeInvokeCleansUpWhenItsReaderStops: `make invoke` piped into a
// reader that stops early (head) still stops the emulator and the
// bootstrap, so that nothing of that run is left holding its ports and the
// next `make invoke` succeeds. The run uses a bin directory of its own, so
// that the processes it leaves (if any) are told apart from any other
// test's by their path.
func TestMakeInvokeCleansUpWhenItsReaderStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the emulator and a bootstrap")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	bin := t.TempDir()
	// Whatever this run leaves behind is ended, even when the test fails.
	t.Cleanup(func() {
		for _, p := range processesUnder(t, bin) {
			if pid, err := strconv.Atoi(p[:strings.IndexByte(p, ':')]); err == nil {
				if proc, err := os.FindProcess(pid); err == nil {
					_ = proc.Kill()
				}
			}
		}
	})
	invoke := "make -s -C .. invoke FUNCTION=api EVENT=events/api-quota.json BIN=" + bin
	first := exec.Command("bash", "-c", "set -o pipefail; "+invoke+" 2>/dev/null | head -c 10; exit 0")
	var out bytes.Buffer
	first.Stdout = &out
	if err := first.Run(); err != nil {
		t.Fatalf("make invoke | head -c 10: %v", err)
	}
	if out.String() != `{"statusCo` {
		t.Fatalf("make invoke | head -c 10 printed %q, want the first 10 bytes of the response", out.String())
	}
	// The emulator is killed synchronously before make returns; the
	// bootstrap, its child, may take a moment to go.
	var left []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = processesUnder(t, bin)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("after make invoke | head, processes of that run are still running:\n%s", strings.Join(left, "\n"))
	}
	second := exec.Command("bash", "-c", invoke)
	second.Stderr = &out
	got, err := second.Output()
	if err != nil || !strings.Contains(string(got), `"statusCode":200`) {
		t.Fatalf("second make invoke: %v, %s\n%s", err, got, out.String())
	}
	if left := processesUnder(t, bin); len(left) > 0 {
		t.Fatalf("after a whole make invoke, processes of that run are still running:\n%s", strings.Join(left, "\n"))
	}
}

// processesUnder lists the running processes whose command line names a
// file under dir (Linux /proc; none elsewhere).
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var found []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a zombie already reaped of its command line
		}
		cmd := strings.ReplaceAll(string(bytes.TrimRight(raw, "\x00")), "\x00", " ")
		if strings.Contains(cmd, dir+"/") && !strings.Contains(cmd, "make ") && !strings.HasPrefix(cmd, "bash -c") {
			found = append(found, e.Name()+": "+cmd)
		}
	}
	return found
}
