package tests

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/version"
)

// TestVersionIsStampedIntoEveryBinary: one VERSION given to the Makefile's
// build targets (`make slidegate`, `make build-AuthorizerFunction`, what
// `sam build` runs) is what the authorizer, built by its target and run
// under the emulator, logs on its cold-start line and on a decision line,
// and what every target's build command stamps: the same -X flag, which
// `make -n` shows for each without linking it (cmd/slidegate's
// TestVersionCommand shows that `slidegate version` prints the stamp).
// One binary is linked, not one per target: the stamp reaches
// internal/version the same way in every one.
func TestVersionIsStampedIntoEveryBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a bootstrap and the emulator")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	t.Parallel()
	const stampVersion = "v0.0.0-versiontest.1"
	dir := t.TempDir()
	makeArgs := func(args ...string) []string {
		return append([]string{"-s", "-C", "..", "VERSION=" + stampVersion}, args...)
	}
	targets := [][]string{
		{"slidegate", "SLIDEGATE=" + filepath.Join(dir, "slidegate")},
		{"build-AuthorizerFunction", "ARTIFACTS_DIR=" + filepath.Join(dir, "authorizer"), "GOOS=" + runtime.GOOS, "GOARCH=" + runtime.GOARCH},
		{"build-ApiFunction", "ARTIFACTS_DIR=" + filepath.Join(dir, "api"), "GOOS=" + runtime.GOOS, "GOARCH=" + runtime.GOARCH},
	}
	stamp := "-X " + version.ImportPath + ".stamp=" + stampVersion
	for _, target := range targets {
		out, err := exec.Command("make", makeArgs(append([]string{"-n"}, target...)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", strings.Join(target, " "), err, out)
		}
		var builds int
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "go build ") {
				builds++
				if !strings.Contains(line, stamp) {
					t.Errorf("make %s builds without %q: %s", target[0], stamp, line)
				}
			}
		}
		if builds != 1 {
			t.Errorf("make -n %s: %d go build commands, want 1:\n%s", target[0], builds, out)
		}
	}

	authorizer := targets[1]
	if out, err := exec.Command("make", makeArgs(authorizer...)...).CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(authorizer, " "), err, out)
	}
	// No Redis: the anonymous event is a degraded Allow, logged at WARN.
	rie := lambdatest.StartRIE(t, filepath.Join(dir, "authorizer", "bootstrap"), nil)
	event, err := os.ReadFile("../events/authorizer-anonymous.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rie.Invoke(t, event); err != nil {
		t.Fatalf("invoke: %v", err)
	}
	logs := rie.WaitLogsContaining(`"msg":"runtime ready"`, `"msg":"rate limit decision"`)
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string  `json:"msg"`
			Version *string `json:"version"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line.Msg != "runtime ready" && line.Msg != "rate limit decision" {
			continue
		}
		seen[line.Msg] = true
		if line.Version == nil || *line.Version != stampVersion {
			t.Errorf("the %q line carries version %v, want %q: %s", line.Msg, line.Version, stampVersion, sc.Text())
		}
	}
	if !seen["runtime ready"] || !seen["rate limit decision"] {
		t.Fatalf("want a runtime ready and a decision line, saw %v:\n%s", seen, logs)
	}
}
