package main

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestSlidegateControlsOnRedis: the same commands on a direct connection,
// and inspect showing the caller's control and the network's.
func TestSlidegateControlsOnRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	env := map[string]string{"REDIS_URL": srv.URL(), "RATE_LIMIT_HASH_KEY": cliHashKey, "USER": "carol"}
	run := func(t *testing.T, args ...string) repoRun {
		t.Helper()
		return runRepo(t, maps.Clone(env), "", args...)
	}
	if r := run(t, "block", "--ip", "203.0.113.7", "--for", "90m", "--reason", "scraper", "--yes"); r.code != 0 {
		t.Fatalf("block: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "block", "--network", "203.0.113.0/24", "--for", "1h", "--reason", "botnet", "--by", "dave", "--yes"); r.code != 0 {
		t.Fatalf("block a network: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := run(t, "inspect", "--ip", "203.0.113.7")
	if r.code != 0 || !strings.Contains(r.stdout, "control: block until ") || !strings.Contains(r.stdout, ": scraper") ||
		!strings.Contains(r.stdout, "network control: block of 203.0.113.0/24 until ") {
		t.Fatalf("inspect: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var in struct {
		Control *struct {
			Kind, SetBy, Reason string
		} `json:"control"`
		Networks []struct{ Kind, Network string } `json:"networkControls"`
	}
	r = run(t, "inspect", "--ip", "203.0.113.7", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil || in.Control == nil || in.Control.Kind != "block" || in.Control.SetBy == "" ||
		len(in.Networks) != 1 || in.Networks[0].Network != "203.0.113.0/24" {
		t.Fatalf("inspect --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	// Refused before anything is sent, with the command line's status.
	for name, args := range map[string][]string{
		"no reason":         {"block", "--ip", "203.0.113.8", "--for", "1h", "--yes"},
		"no duration":       {"exempt", "--ip", "203.0.113.8", "--reason", "r", "--yes"},
		"host bits":         {"block", "--network", "203.0.113.1/24", "--for", "1h", "--reason", "r", "--yes"},
		"scale a network":   {"scale", "--network", "203.0.113.0/24", "x2", "--for", "1h", "--reason", "r", "--yes"},
		"no factor":         {"scale", "--ip", "203.0.113.8", "--for", "1h", "--reason", "r", "--yes"},
		"bad factor":        {"scale", "--ip", "203.0.113.8", "xten", "--for", "1h", "--reason", "r", "--yes"},
		"caller and net":    {"lift", "--ip", "203.0.113.8", "--network", "203.0.113.0/24", "--yes"},
		"duration too long": {"block", "--ip", "203.0.113.8", "--for", "31d", "--reason", "r", "--yes"},
	} {
		if r := run(t, args...); r.code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s%s", name, r.code, r.stdout, r.stderr)
		}
	}
	r = run(t, "controls")
	if r.code != 0 || !testkit.LineWith(r.stdout, "block ", "203.0.113.0/24", "dave", "botnet") || !testkit.LineWith(r.stdout, "block ", "scraper") {
		t.Fatalf("controls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
