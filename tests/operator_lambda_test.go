package tests

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// hashOf is an identity's hash as the functions log it with cliHashKey.
func hashOf(id string) string {
	h, err := identity.NewHasher([]byte(cliHashKey))
	if err != nil {
		panic(err)
	}
	return h.Hash(id)
}

// cliControls is the JSON of slidegate controls --json.
type cliControls struct {
	Controls []struct {
		Kind, Tag, SetBy, Reason string
		Factor                   float64
		Until                    time.Time
	} `json:"controls"`
	Networks []struct {
		Kind, Network, SetBy, Reason string
	} `json:"networks"`
}

// TestSlidegateControlsThroughTheOperatorFunction: the command, given
// --function, sets, lists and lifts controls through the operator
// function's built bootstrap under the Lambda emulator (its Invoke API, as
// the SDK calls it with AWS_ENDPOINT_URL_LAMBDA), on a real redis-server;
// the set-by defaults to the AWS caller (STS, on moto). A bad payload gets
// a clear error, and the function's log never holds an identity in clear.
func TestSlidegateControlsThroughTheOperatorFunction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap, the command and the emulator")
	}
	t.Parallel() // waits for the control watch: runs beside the other waiting tests
	srv := redistest.StartServer(t)
	rie := lambdatest.StartRIE(t, lambdatest.BuildBootstrap(t, "./functions/operator"), map[string]string{
		"REDIS_URL":           srv.URL(),
		"RATE_LIMIT_HASH_KEY": cliHashKey,
	})
	env := mototest.Shared(t).Account(t).Env()
	env["AWS_ENDPOINT_URL_LAMBDA"] = "http://" + rie.Addr
	// The command reads no Redis with --function: none is given it.
	limiter, err := ratelimit.NewLimiter(srv.Client(t), ratelimit.Options{IdentityHashKey: []byte(cliHashKey)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const caller = "ip:203.0.113.7"

	run := func(t *testing.T, stdin string, args ...string) cliRun {
		t.Helper()
		return runSlidegate(t, env, stdin, append(args, "--function", "function")...)
	}

	// Not confirmed: nothing is sent.
	r := run(t, "n\n", "block", "--ip", "203.0.113.7", "--for", "1h", "--reason", "credential stuffing")
	if r.code != 1 || !strings.Contains(r.stderr, "Block ip:203.0.113.7 (anonymous) through function for 1h? [y/N]") || !strings.Contains(r.stderr, "not confirmed") {
		t.Fatalf("unconfirmed block: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, ok, _ := limiter.Controls().Get(ctx, caller); ok {
		t.Fatal("an unconfirmed block was set")
	}

	r = run(t, "y\n", "block", "--ip", "203.0.113.7", "--for", "1h", "--reason", "credential stuffing")
	if r.code != 0 || !strings.Contains(r.stdout, "blocked ip:203.0.113.7 (anonymous) until ") {
		t.Fatalf("block: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c, ok, err := limiter.Controls().Get(ctx, caller)
	if err != nil || !ok || c.Kind != controls.Block || c.Reason != "credential stuffing" {
		t.Fatalf("the block in Redis: %+v, %v, %v", c, ok, err)
	}
	if !strings.HasPrefix(c.SetBy, "arn:aws:") {
		t.Errorf("set by %q, want the AWS caller's ARN (sts:GetCallerIdentity)", c.SetBy)
	}
	if d := time.Until(c.Until); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("the block ends in %s, want 1h", d)
	}
	// The decisions of a limiter reading controls, as the functions' are.
	decider, err := ratelimit.NewLimiter(srv.Client(t), ratelimit.Options{IdentityHashKey: []byte(cliHashKey), Controls: true})
	if err != nil {
		t.Fatal(err)
	}
	tier := ratelimit.Limit{Name: "anonymous", Count: 3, Window: time.Minute}
	decide := func(id string) ratelimit.Result {
		t.Helper()
		res, err := decider.Decide(ctx, 1, ratelimit.Check{Identity: id, Limit: tier})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := decide(caller); res.Allowed || res.Control.Kind != controls.Block {
		t.Fatalf("the blocked caller's next request: %+v, want denied by the block", res)
	}

	r = run(t, "", "scale", "--api-key-hash", strings.Repeat("ab", 32), "x10", "--for", "2h", "--reason", "launch", "--by", "alice", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "scaled x10 key:") {
		t.Fatalf("scale: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	scaled := "key:" + strings.Repeat("ab", 32)
	// A new control reaches a warm decider at its first decision after
	// its control watch reads the controls again: within
	// controls.Propagation (the blocked caller's control applied at once:
	// that decider had not read them yet).
	time.Sleep(controls.Propagation)
	for i := range 31 {
		if res := decide(scaled); res.Allowed != (i < 30) || (i < 30 && res.Control.Kind != controls.Scale) {
			t.Fatalf("request %d of the caller scaled x10 on a limit of 3: %+v, want 30 admitted", i+1, res)
		}
	}
	r = run(t, "", "exempt", "--network", "198.51.100.0/24", "--for", "30m", "--reason", "monitor", "--by", "bob", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "exempted network 198.51.100.0/24") {
		t.Fatalf("exempt a network: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = run(t, "", "controls")
	if r.code != 0 || !testkit.LineWith(r.stdout, "block ", hashOf(caller), "arn:aws:", "credential stuffing") ||
		!testkit.LineWith(r.stdout, "scale ", "x10", "alice", "launch") || !testkit.LineWith(r.stdout, "exempt ", "198.51.100.0/24", "bob", "monitor") {
		t.Fatalf("controls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, "", "controls", "--json")
	var list cliControls
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 {
		t.Fatalf("controls --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if len(list.Controls) != 2 || list.Controls[0].Kind != "block" || list.Controls[0].Tag != limiter.Controls().Tag(caller) ||
		list.Controls[1].Kind != "scale" || list.Controls[1].Factor != 10 || len(list.Networks) != 1 || list.Networks[0].Network != "198.51.100.0/24" {
		t.Fatalf("controls --json = %+v", list)
	}

	r = run(t, "", "lift", "--ip", "203.0.113.7", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "lifted the block of ip:203.0.113.7") {
		t.Fatalf("lift: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, ok, _ := limiter.Controls().Get(ctx, caller); ok {
		t.Fatal("the block outlived its lift")
	}
	if res := decide(caller); !res.Allowed || res.Control.Kind != controls.None || res.Decisions[0].Remaining != 2 {
		t.Fatalf("the caller's next request after the lift: %+v, want admitted on its whole budget (the block spent nothing)", res)
	}
	r = run(t, "", "lift", "--ip", "203.0.113.7", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "had no control in force") {
		t.Fatalf("second lift: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, "", "lift", "--network", "198.51.100.0/24", "--yes")
	if r.code != 0 || !strings.Contains(r.stdout, "lifted the exempt of network 198.51.100.0/24") {
		t.Fatalf("lift a network: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// What the function refuses, with a clear error: the command says it.
	r = run(t, "", "block", "--ip", "203.0.113.7", "--for", "1h", "--reason", "bad\tname", "--yes", "--by", "alice")
	if r.code != 1 || !strings.Contains(r.stderr, "function refused the request") || !strings.Contains(r.stderr, "control character") {
		t.Fatalf("a reason with a tab: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Bad payloads, straight to the Invoke API.
	for name, tc := range map[string]struct{ payload, want string }{
		"unknown field":   {`{"action":"block","identity":"ip:192.0.2.1","duration":"1h","reason":"r","bogus":1}`, `unknown field "bogus"`},
		"two objects":     {`{"action":"list"} {"action":"list"}`, "after top-level value"},
		"case folded":     {`{"Action":"list"}`, `unknown field "Action"`},
		"given twice":     {`{"action":"list","action":"block"}`, "given twice"},
		"not an object":   {`"block"`, "bad control request"},
		"too big":         {`{"action":"block","reason":"` + strings.Repeat("x", 5000) + `"}`, "more than 4096"},
		"no identity":     {`{"action":"block","duration":"1h","reason":"r"}`, "exactly one of identity and network"},
		"unknown kind":    {`{"action":"block","identity":"user:1","duration":"1h","reason":"r"}`, "does not start with a kind"},
		"scaled network":  {`{"action":"scale","network":"10.0.0.0/8","factor":2,"duration":"1h","reason":"r"}`, "not a scale"},
		"host bits":       {`{"action":"block","network":"10.0.0.1/8","duration":"1h","reason":"r"}`, "host bits set"},
		"too long":        {`{"action":"block","identity":"ip:192.0.2.1","duration":"31d","reason":"r"}`, "more than the 720h0m0s"},
		"unknown action":  {`{"action":"delete","identity":"ip:192.0.2.1"}`, `action "delete"`},
		"factor on block": {`{"action":"block","identity":"ip:192.0.2.1","factor":2,"duration":"1h","reason":"r"}`, "takes no factor"},
	} {
		_, err := rie.Invoke(t, []byte(tc.payload))
		var fe *lambdatest.FunctionError
		if !errors.As(err, &fe) || !strings.Contains(fe.Message, tc.want) {
			t.Errorf("%s: %v, want a function error saying %q", name, err, tc.want)
		}
	}
	// The events make invoke FUNCTION=operator sends.
	files, err := filepath.Glob(filepath.Join("..", "events", "operator-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("events/operator-*.json: %v, %d files", err, len(files))
	}
	for _, f := range files {
		event, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := rie.Invoke(t, event); err != nil || !strings.Contains(string(out), `"action"`) {
			t.Errorf("%s: %s, %v", filepath.Base(f), out, err)
		}
	}
	if n, _ := srv.Client(t).Exists(ctx, "rl:{"+limiter.Controls().Tag("ip:192.0.2.1")+"}:ctl").Result(); n != 0 {
		t.Error("a refused request wrote a control")
	}
	logs := rie.Logs()
	if !strings.Contains(logs, `"msg":"live control changed","action":"lift","by":"arn:aws:`) {
		t.Errorf("the function's log does not say who lifted the block:\n%s", logs)
	}
	if !strings.Contains(logs, `"msg":"live control changed"`) || !strings.Contains(logs, `"msg":"operator request refused"`) {
		t.Errorf("the function's log lacks its change and refusal lines:\n%s", logs)
	}
	for _, clear := range []string{"203.0.113.7", strings.Repeat("ab", 32), "192.0.2.1"} {
		if strings.Contains(logs, clear) {
			t.Errorf("the function's log holds the identity %s in clear:\n%s", clear, logs)
		}
	}
}
