package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/deployconfig"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// TestOperatorActsOnTheIdentityTheLogsPrint (issue 41): the identity a
// decision's log line prints is the one slidegate takes back, as it is
// printed. Taken from a real decision's line (the API function's runtime
// on a real redis-server, with a hash key), it inspects the caller (one
// hash, the same), blocks it (the caller is then denied), lists it, and
// lifts it (admitted again).
//
// Before: block --identity did not exist and inspect printed two hashes,
// the key's hash tag and the logs' hex; no flag took either.
func TestOperatorActsOnTheIdentityTheLogsPrint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	t.Parallel() // waits for the control watch: runs beside the other waiting tests
	srv := redistest.StartServer(t)
	redisEnv := map[string]string{"REDIS_URL": srv.URL(), "RATE_LIMIT_HASH_KEY": cliHashKey}
	spec, err := deployconfig.Load("../template.yaml", "../samconfig.toml", "dev")
	if err != nil {
		t.Fatal(err)
	}
	env := spec.EnvironmentOf("ApiFunction")
	maps.Copy(env, redisEnv)
	var logs testkit.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] }, instance.Options{Logger: logger, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	decide := func() apigw.Outcome {
		t.Helper()
		out, err := rt.Decide(context.Background(), apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.23", StageVariables: spec.StageVariables})
		if err != nil {
			t.Fatalf("decide: %v", err)
		}
		return out
	}
	if out := decide(); !out.Result.Allowed {
		t.Fatalf("first request: %v, want it allowed", out.Kind)
	}
	// The identity as an operator finds it: the decision's log line.
	var line struct{ Identity, Tier string }
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l struct{ Msg, Identity, Tier string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Identity != "" && l.Tier != "" {
			line.Identity, line.Tier = l.Identity, l.Tier
		}
	}
	if len(line.Identity) != 32 || line.Tier != "anonymous" {
		t.Fatalf("no decision line with a 32-digit identity and its tier in:\n%s", logs.String())
	}
	run := func(t *testing.T, args ...string) cliRun {
		t.Helper()
		r := runSlidegate(t, maps.Clone(redisEnv), "", args...)
		if r.code != 0 {
			t.Fatalf("slidegate %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}

	// inspect names the caller by that one hash, and finds its count.
	r := run(t, "inspect", "--identity", line.Identity, "--tier", line.Tier)
	if first, _, _ := strings.Cut(r.stdout, "\n"); first != "caller "+line.Identity+" (anonymous) on stage dev" {
		t.Errorf("inspect's first line %q: want the caller named by the hash the logs print, and no other", first)
	}
	var in cliInspection
	if err := json.Unmarshal([]byte(run(t, "inspect", "--identity", line.Identity, "--tier", line.Tier, "--json").stdout), &in); err != nil {
		t.Fatal(err)
	}
	if in.Hash != line.Identity || in.used()["anonymous"] != 1 {
		t.Errorf("inspect --json: hash %q, used %v; want %q and the one request", in.Hash, in.used(), line.Identity)
	}
	r = run(t, "inspect", "--ip", "198.51.100.23")
	if strings.Count(r.stdout, line.Identity) != 1 || strings.Contains(r.stdout, "{") {
		t.Errorf("inspect --ip prints the logs' hash once and no other hash:\n%s", r.stdout)
	}

	// block with it: the caller is denied once the control reaches the
	// warm instance.
	run(t, "block", "--identity", line.Identity, "--for", "10m", "--reason", "from the logs", "--yes")
	time.Sleep(controls.Propagation + 500*time.Millisecond)
	if out := decide(); out.Result.Allowed || out.Result.Control.Kind != controls.Block {
		t.Fatalf("after block --identity %s: %v (control %v), want the caller blocked", line.Identity, out.Kind, out.Result.Control.Kind)
	}
	if r := run(t, "controls"); !testkit.LineWith(r.stdout, "block ", line.Identity, "from the logs") {
		t.Errorf("controls lists the caller by another name than the logs':\n%s", r.stdout)
	}
	if r := run(t, "inspect", "--ip", "198.51.100.23"); !strings.Contains(r.stdout, "control: block until ") {
		t.Errorf("inspect --ip does not show the block set through the hash:\n%s", r.stdout)
	}
	run(t, "lift", "--identity", "hash:"+strings.ToUpper(line.Identity), "--yes")
	// The block's denial the instance cached may be repeated this long.
	time.Sleep(controls.Propagation + 500*time.Millisecond)
	if out := decide(); !out.Result.Allowed {
		t.Fatalf("after lift: %v, want the caller admitted again", out.Kind)
	}

	// A hash says no tier: inspect asks for it rather than guess.
	if r := runSlidegate(t, maps.Clone(redisEnv), "", "inspect", "--identity", line.Identity); r.code != 2 || !strings.Contains(r.stderr, "--tier") {
		t.Errorf("inspect of a hash without --tier: exit %d, want 2 and a word on --tier\n%s%s", r.code, r.stdout, r.stderr)
	}
}
