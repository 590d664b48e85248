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
)

// TestVersionIsStampedIntoEveryBinary: one VERSION given to the Makefile's
// build targets (`make slidegate`, `make build-AuthorizerFunction`, what
// `sam build` runs) is what `slidegate version` prints and what the
// authorizer, run under the emulator, logs on its cold-start line and on a
// decision line.
func TestVersionIsStampedIntoEveryBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command, a bootstrap and the emulator")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	const version = "v0.0.0-versiontest.1"
	dir := t.TempDir()
	build := func(args ...string) {
		t.Helper()
		cmd := exec.Command("make", append([]string{"-s", "-C", "..", "VERSION=" + version}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	build("slidegate", "SLIDEGATE="+filepath.Join(dir, "slidegate"))
	build("build-AuthorizerFunction", "ARTIFACTS_DIR="+filepath.Join(dir, "authorizer"), "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)

	out, err := exec.Command(filepath.Join(dir, "slidegate"), "version").Output()
	if err != nil {
		t.Fatalf("slidegate version: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != "slidegate "+version {
		t.Errorf("slidegate version printed %q, want %q", got, "slidegate "+version)
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
		if line.Version == nil || *line.Version != version {
			t.Errorf("the %q line carries version %v, want %q: %s", line.Msg, line.Version, version, sc.Text())
		}
	}
	if !seen["runtime ready"] || !seen["rate limit decision"] {
		t.Fatalf("want a runtime ready and a decision line, saw %v:\n%s", seen, logs)
	}
}
