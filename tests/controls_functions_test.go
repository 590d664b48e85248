package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/faultproxy"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// controlTopology is a planTopology with the operator's own connection to
// the same Redis, which writes the controls through the library (as the
// command and the operator function do).
type controlTopology struct {
	planTopology
	operator redis.UniversalClient
}

// controlTopologies are planTopologies with an operator connection each.
func controlTopologies(t *testing.T) []controlTopology {
	t.Helper()
	single := redistest.StartServer(t)
	cluster := redistest.StartCluster(t, 3, 0)
	topos := []controlTopology{
		{planTopology{"single", map[string]string{"REDIS_URL": single.URL()}, func(t testing.TB) map[string]int64 {
			return redisCommandCalls(t, single.Client(t))
		}}, single.Client(t)},
		{planTopology{"cluster", map[string]string{"REDIS_URL": "redis://" + cluster.Addrs()[0], "REDIS_CLUSTER": "true"}, nil}, cluster.Client(t)},
	}
	return topos
}

// controlLimiter is the operator's limiter: the functions' key prefix and
// identity hash (no key configured in these tests: plain SHA-256).
func controlLimiter(t testing.TB, client redis.UniversalClient) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "rl", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// setControl sets kind (factor for a scale) on identity for d.
func setControl(t testing.TB, l *ratelimit.Limiter, identity string, kind controls.Kind, factor float64, d time.Duration) {
	t.Helper()
	c := controls.Control{Kind: kind, Factor: factor, Until: time.Now().Add(d), Reason: "controls test", SetBy: "tests"}
	if err := l.Controls().Set(context.Background(), identity, c); err != nil {
		t.Fatalf("set %s on %s: %v", kind, identity, err)
	}
}

// liftControl lifts identity's control, which must be there.
func liftControl(t testing.TB, l *ratelimit.Limiter, identity string) {
	t.Helper()
	if _, ok, err := l.Controls().Lift(context.Background(), identity); err != nil || !ok {
		t.Fatalf("lift %s: %v %v", identity, ok, err)
	}
}

// ctlName is the control an authorizer answer's context names.
func (a azAnswer) ctlName() string { s, _ := a.resp.Context["control"].(string); return s }

// untilAnswer sends r until ok says yes, at most within, and returns the
// answer and how long it took.
func untilAnswer(t *testing.T, rie *lambdatest.RIE, r azRequest, within time.Duration, ok func(azAnswer) bool) (azAnswer, time.Duration, bool) {
	t.Helper()
	start := time.Now()
	for {
		a := azInvoke(t, rie, azRESTEvent(t, r))
		if ok(a) {
			return a, time.Since(start), true
		}
		if time.Since(start) > within {
			return a, time.Since(start), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watchWait is how long after setting a NEW control on a caller a test
// waits before the warm instance's next request must apply it: the
// instance's control watch re-reads the controls at most every
// controls.Propagation, on its first request past that, and the
// read comes before that request's decision; so once controls.Propagation
// has passed since the control was set (measured on the same machine's
// clock), the next request applies it. The margin covers the test's own
// steps, not the instance's speed.
const watchWait = controls.Propagation + 500*time.Millisecond

// awaitWatch waits watchWait after a new control was set.
func awaitWatch() { time.Sleep(watchWait) }

// propagationBound is the documented staleness of a change of control at
// a warm instance (controls.Propagation, plus one request), with a
// generous margin for a loaded machine.
const propagationBound = controls.Propagation + 4*time.Second

// TestControlsThroughTheAuthorizer: live controls written with the library
// change the warm authorizer's answers on a single node and on a cluster.
// A new control on a caller reaches a warm instance at its first request
// after its control watch's next read (within controls.Propagation of the
// set, plus one request), so each subtest that sets one waits that long
// first, and no request is made meanwhile: a block is denied from the
// first request after that wait, spending nothing, with Retry-After at its
// end, and admitted after it expires; an exempt IP spends nothing; scale
// x10 admits ten times the limit and the context
// shows the scaled limit, and lifted it leaves the caller where its counts
// say; a lifted block and a new exemption are seen within the bound despite
// the deny cache; a network block set while warm reaches the instance
// within the documented staleness, and lifted is gone within it too; a
// malformed record changes nothing and is logged.
func TestControlsThroughTheAuthorizer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	t.Parallel() // waits for the control watch: runs beside the other waiting tests
	secret := testkit.RandomSecret(t)
	ctx := context.Background()
	for _, topo := range controlTopologies(t) {
		t.Run(topo.name, func(t *testing.T) {
			t.Parallel() // its own Redis and instance: the topologies wait side by side
			// Anonymous 3/1m, sliding log: exact counts.
			rie := azStart(t, planEnv(topo.planTopology, secret, nil))
			op := controlLimiter(t, topo.operator)
			ip := func(n int) string { return fmt.Sprintf("203.0.113.%d", 100+n) }
			// Warm: scripts loaded, network controls read once.
			if a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: ip(0)})); !a.allowed() {
				t.Fatalf("warm-up: %+v", a)
			}

			t.Run("block: denied within the watch's bound plus one request, nothing spent, admitted after its end", func(t *testing.T) {
				r := azRequest{ip: ip(1)}
				// Long enough to outlast the wait by 3 s.
				const block = watchWait + 3*time.Second
				setControl(t, op, "ip:"+r.ip, controls.Block, 0, block)
				awaitWatch()
				for i := range 5 {
					a := azInvoke(t, rie, azRESTEvent(t, r))
					retry, _ := a.ctxInt("retryAfter")
					if !a.denied() || a.ctlName() != "blocked-by-control" || retry < 1 || retry > int64(block/time.Second)+1 {
						t.Fatalf("blocked request %d: %+v, want a Deny naming the control with retryAfter at the block's end (1..%d)", i+1, a, int64(block/time.Second)+1)
					}
					if limit, _ := a.ctxInt("limit"); limit != 3 || a.resp.Context["name"] != "anonymous" {
						t.Fatalf("blocked request %d: context %v, want the anonymous limit's headers", i+1, a.resp.Context)
					}
				}
				a, took, ok := untilAnswer(t, rie, r, block+propagationBound, azAnswer.allowed)
				if !ok {
					t.Fatalf("still refused %s after the block's end: %+v", took, a)
				}
				// Nothing was spent while blocked: the first admission
				// leaves two of three.
				if remaining, _ := a.ctxInt("remaining"); remaining != 2 || a.ctlName() != "" {
					t.Fatalf("after the block: context %v, want remaining 2 and no control", a.resp.Context)
				}
			})

			t.Run("exempt: admitted without spending", func(t *testing.T) {
				r := azRequest{ip: ip(2)}
				setControl(t, op, "ip:"+r.ip, controls.Exempt, 0, time.Hour)
				awaitWatch()
				for i := range 10 {
					if a := azInvoke(t, rie, azRESTEvent(t, r)); !a.allowed() || a.ctlName() != "exempt" {
						t.Fatalf("exempt request %d: %+v", i+1, a)
					}
				}
				liftControl(t, op, "ip:"+r.ip)
				if n, _ := admittedInARow(t, rie, r, 5); n != 3 {
					t.Fatalf("after the exemption: %d admitted, want the whole 3 (nothing spent)", n)
				}
			})

			t.Run("scale x10: ten times the limit, shown; lifted, the counts stand", func(t *testing.T) {
				r := azRequest{ip: ip(3)}
				setControl(t, op, "ip:"+r.ip, controls.Scale, 10, time.Hour)
				awaitWatch()
				a := azInvoke(t, rie, azRESTEvent(t, r))
				if limit, _ := a.ctxInt("limit"); !a.allowed() || limit != 30 || a.ctlName() != "scaled" || !strings.Contains(fmt.Sprint(a.resp.Context["policy"]), "q=30") {
					t.Fatalf("scaled: context %v, want limit 30 and policy q=30, control scaled", a.resp.Context)
				}
				n, last := admittedInARow(t, rie, r, 40)
				if n != 29 || last.ctlName() != "scaled" {
					t.Fatalf("scale x10 of 3/1m: %d more admitted, want 29 (30 in all)", n)
				}
				liftControl(t, op, "ip:"+r.ip)
				// 30 spent of an unscaled 3: denied throughout, first from
				// the deny cache (the scaled denial, held at most
				// controls.Propagation), then by Redis under the plain limit.
				unscaled := func(a azAnswer) bool {
					limit, _ := a.ctxInt("limit")
					return a.denied() && limit == 3 && a.ctlName() == ""
				}
				a, took, ok := untilAnswer(t, rie, r, propagationBound, func(a azAnswer) bool {
					if !a.denied() {
						t.Fatalf("lifted scale: admitted with 30 spent of 3: %+v", a)
					}
					return unscaled(a)
				})
				if !ok {
					t.Fatalf("lifted scale: after %s still %v, want the plain limit's denial", took, a.resp.Context)
				}
			})

			t.Run("a lifted block is seen within the bound despite the deny cache", func(t *testing.T) {
				r := azRequest{ip: ip(4)}
				setControl(t, op, "ip:"+r.ip, controls.Block, 0, time.Hour)
				awaitWatch()
				if a := azInvoke(t, rie, azRESTEvent(t, r)); !a.denied() {
					t.Fatalf("blocked: %+v", a)
				}
				if a := azInvoke(t, rie, azRESTEvent(t, r)); !a.denied() {
					t.Fatalf("blocked again (the deny cache): %+v", a)
				}
				liftControl(t, op, "ip:"+r.ip)
				a, took, ok := untilAnswer(t, rie, r, propagationBound, azAnswer.allowed)
				if !ok {
					t.Fatalf("the lifted block still answers after %s: %+v", took, a)
				}
				t.Logf("lifted block seen after %s", took)
			})

			t.Run("a new exemption is seen within the bound despite the deny cache", func(t *testing.T) {
				r := azRequest{ip: ip(5)}
				if n, _ := admittedInARow(t, rie, r, 5); n != 3 {
					t.Fatalf("%d admitted, want 3", n)
				}
				setControl(t, op, "ip:"+r.ip, controls.Exempt, 0, time.Hour)
				a, took, ok := untilAnswer(t, rie, r, propagationBound, azAnswer.allowed)
				if !ok || a.ctlName() != "exempt" {
					t.Fatalf("the exemption not seen after %s: %+v", took, a)
				}
				t.Logf("new exemption seen after %s", took)
			})

			t.Run("a network block set while warm arrives within the staleness, and its lift too", func(t *testing.T) {
				network := netip.MustParsePrefix("192.0.2.0/24")
				r := azRequest{ip: "192.0.2.9"}
				if a := azInvoke(t, rie, azRESTEvent(t, r)); !a.allowed() {
					t.Fatalf("before the block: %+v", a)
				}
				err := op.Controls().SetNetwork(ctx, network, controls.Control{Kind: controls.Block, Until: time.Now().Add(time.Hour), Reason: "controls test"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _, _ = op.Controls().LiftNetwork(ctx, network) })
				blocked := func(a azAnswer) bool { b, _ := a.resp.Context["blocked"].(bool); return a.denied() && b }
				a, took, ok := untilAnswer(t, rie, r, propagationBound, blocked)
				if !ok {
					t.Fatalf("the network block not seen after %s: %+v", took, a)
				}
				if retry, _ := a.ctxInt("retryAfter"); a.ctlName() != "blocked-by-control" || retry < 3500 || retry > 3600 {
					t.Fatalf("network block: context %v, want blocked-by-control with retryAfter at its end", a.resp.Context)
				}
				t.Logf("network block seen after %s", took)
				if resp := azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{ip: "192.0.2.10"})); resp.IsAuthorized {
					t.Fatal("HTTP API: a live-blocked network authorized")
				}
				// A caller of the network that spent nothing (r spent
				// until the block arrived): blocked now, spending nothing,
				// admitted once the lift arrives.
				fresh := azRequest{ip: "192.0.2.77"}
				if a := azInvoke(t, rie, azRESTEvent(t, fresh)); !blocked(a) {
					t.Fatalf("blocked network, another address: %+v", a)
				}
				if _, _, err := op.Controls().LiftNetwork(ctx, network); err != nil {
					t.Fatal(err)
				}
				if a, took, ok := untilAnswer(t, rie, fresh, propagationBound, azAnswer.allowed); !ok {
					t.Fatalf("the lifted network block still answers after %s: %+v", took, a)
				}
			})

			t.Run("a malformed record changes nothing and is logged", func(t *testing.T) {
				r := azRequest{ip: ip(6)}
				setControl(t, op, "ip:"+r.ip, controls.Block, 0, time.Hour)
				corruptControls(t, topo.operator)
				// The watch lists the caller (its field is not the record)
				// from its next read: from then on every decision reads
				// the malformed record.
				awaitWatch()
				from := len(rie.Logs())
				n, last := admittedInARow(t, rie, r, 5)
				if n != 3 || last.ctlName() != "" {
					t.Fatalf("under a malformed block: %d admitted, want the limit's 3, no control", n)
				}
				logs := rie.WaitLogsContaining(observe.MalformedControlMessage)[from:]
				if c := strings.Count(logs, observe.MalformedControlMessage); c != 4 {
					t.Fatalf("%d malformed-control warnings, want 4 (one per decision)", c)
				}
				if strings.Contains(logs, r.ip) {
					t.Fatal("the caller's address in clear in the log")
				}
			})

			_, metrics := awaitRecords(t, rie, 0, func(_, metrics []map[string]any) bool { return countControl(metrics, "scaled") >= 30 })
			for control, atLeast := range map[string]int{"blocked-by-control": 8, "exempt": 11, "scaled": 30} {
				if got := countControl(metrics, control); got < atLeast {
					t.Errorf("ControlledDecisions{control=%s}: %d, want at least %d", control, got, atLeast)
				}
			}
		})
	}
}

// countControl counts the metrics records of decisions control changed.
func countControl(metrics []map[string]any, control string) int {
	n := 0
	for _, m := range metrics {
		if m["control"] == control && m["ControlledDecisions"] == 1.0 {
			n++
		}
	}
	return n
}

// corruptControls overwrites every identity control record on every
// master with one no decision can read, keeping its expiry.
func corruptControls(t testing.TB, client redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	corrupt := func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, "*:ctl").Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := c.Set(ctx, k, "v1 b not-a-time 0 {}", redis.KeepTTL).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch c := client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, corrupt)
	case *redis.Client:
		err = corrupt(ctx, c)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestControlsThroughTheAPIFunction: the API function deciding on its own
// answers a blocked caller 429 with Retry-After at the block's end and the
// headers of its limit, a live-blocked network 403, a scaled caller with
// its scaled limits in the headers and in GET /v1/quota (with the control
// in force), and an exempt caller's quota with its counts untouched, each
// from the first request after the warm function's control watch has read
// the new control (controls.Propagation); behind a REST authorizer, the
// control in the context reaches the answer.
func TestControlsThroughTheAPIFunction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	t.Parallel() // waits for the control watch: runs beside the other waiting tests
	srv := redistest.StartServer(t)
	api := lambdatest.StartRIE(t, lambdatest.BuildBootstrap(t, "./functions/api"), apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS": "3/1m", "RATE_LIMIT_ALGORITHM": "sliding-log", "REDIS_TIMEOUT": "1s",
	}))
	op := controlLimiter(t, srv.Client(t))
	ctx := context.Background()
	call := func(t *testing.T, ip, path string) apitest.Response {
		t.Helper()
		raw, err := api.Invoke(t, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.Path, e.Resource = path, path
			e.RequestContext.Identity.SourceIP = ip
		}))
		if err != nil {
			t.Fatal(err)
		}
		return apitest.Parse(t, raw)
	}
	if resp := call(t, "203.0.113.60", "/v1/items"); resp.StatusCode != http.StatusOK {
		t.Fatalf("warm-up: %d %s", resp.StatusCode, resp.Body)
	}

	setControl(t, op, "ip:203.0.113.61", controls.Block, 0, 10*time.Minute)
	awaitWatch() // a new control: the warm function's watch reads it within controls.Propagation
	resp := call(t, "203.0.113.61", "/v1/items")
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || retry < 595 || retry > 600 ||
		!strings.HasPrefix(resp.Header.Get("RateLimit"), "\"anonymous\";r=0;") {
		t.Fatalf("blocked: %d %v %s, want 429, Retry-After at the block's end, the anonymous limit's headers", resp.StatusCode, resp.Header, resp.Body)
	}
	if resp := call(t, "203.0.113.61", "/v1/quota"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("blocked quota: %d %s, want 429", resp.StatusCode, resp.Body)
	}

	setControl(t, op, "ip:203.0.113.62", controls.Scale, 10, 10*time.Minute)
	awaitWatch() // a new control: the warm function's watch reads it within controls.Propagation
	resp = call(t, "203.0.113.62", "/v1/items")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("RateLimit-Policy"), `"anonymous";q=30;w=60`) || resp.Header.Get("X-RateLimit-Limit") != "30" {
		t.Fatalf("scaled: %d %v, want the scaled limit 30 in the headers", resp.StatusCode, resp.Header)
	}
	quota := call(t, "203.0.113.62", "/v1/quota")
	if quota.StatusCode != http.StatusOK || !strings.Contains(quota.Body, `{"name":"anonymous","limit":30,`) ||
		!strings.Contains(quota.Body, `"control":{"kind":"scaled","factor":10,"end_seconds":`) {
		t.Fatalf("scaled quota: %d %s, want limit 30 and the control", quota.StatusCode, quota.Body)
	}

	setControl(t, op, "ip:203.0.113.63", controls.Exempt, 0, 10*time.Minute)
	awaitWatch() // a new control: the warm function's watch reads it within controls.Propagation
	for range 5 {
		if resp := call(t, "203.0.113.63", "/v1/items"); resp.StatusCode != http.StatusOK {
			t.Fatalf("exempt: %d", resp.StatusCode)
		}
	}
	quota = call(t, "203.0.113.63", "/v1/quota")
	if !strings.Contains(quota.Body, `{"name":"anonymous","limit":3,"window_seconds":60,"remaining":3,`) || !strings.Contains(quota.Body, `"control":{"kind":"exempt","end_seconds":`) {
		t.Fatalf("exempt quota: %s, want nothing spent and the control", quota.Body)
	}

	network := netip.MustParsePrefix("198.51.100.0/24")
	if err := op.Controls().SetNetwork(ctx, network, controls.Control{Kind: controls.Block, Until: time.Now().Add(time.Hour), Reason: "controls test"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(propagationBound)
	for {
		resp := call(t, "198.51.100.7", "/v1/items")
		if resp.StatusCode == http.StatusForbidden && strings.Contains(resp.Body, `"code":"FORBIDDEN"`) && resp.Header.Get("RateLimit") == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live-blocked network: %d %s after %s, want 403 FORBIDDEN", resp.StatusCode, resp.Body, propagationBound)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Behind a REST authorizer: the control in its context (strings, as a
	// REST API hands it) is believed and nothing is decided again.
	raw, err := api.Invoke(t, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
		e.RequestContext.Identity.SourceIP = "203.0.113.64"
		e.RequestContext.Authorizer = map[string]any{"tier": "anonymous", "limit": "30", "remaining": "29", "reset": "2", "window": "60",
			"name": "anonymous", "policy": `"anonymous";q=30;w=60`, "control": "scaled", "controlUntil": fmt.Sprint(time.Now().Add(time.Hour).Unix()), "controlFactor": "10"}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if resp := apitest.Parse(t, raw); resp.StatusCode != http.StatusOK || resp.Header.Get("X-RateLimit-Limit") != "30" {
		t.Fatalf("behind the authorizer: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestNetworkControlsWhileRedisHangs: with Redis hanging, a warm
// authorizer keeps the network controls it last read (a live-blocked
// network stays blocked, with no Redis call), and the request whose read
// of them fails waits no longer than one decision's budget: the read and
// the decision share REDIS_TIMEOUT, the decision degrading at once.
func TestNetworkControlsWhileRedisHangs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	t.Parallel() // waits on a hanging Redis: runs beside the other waiting tests
	srv := redistest.StartServer(t)
	proxy, err := faultproxy.Start(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	op := controlLimiter(t, srv.Client(t))
	err = op.Controls().SetNetwork(context.Background(), netip.MustParsePrefix("192.0.2.0/24"),
		controls.Control{Kind: controls.Block, Until: time.Now().Add(time.Hour), Reason: "controls test"})
	if err != nil {
		t.Fatal(err)
	}
	// Three seconds, so that the shared budget (about one timeout) and two
	// budgets one after the other (two timeouts) stay seconds apart on a
	// loaded machine: the bound below leaves 2.1 s for everything else.
	const timeout = 3 * time.Second
	rie := azStart(t, azEnv(proxy.URL(), testkit.RandomSecret(t), map[string]string{"REDIS_TIMEOUT": timeout.String()}))
	blocked := func(a azAnswer) bool { b, _ := a.resp.Context["blocked"].(bool); return a.denied() && b }
	if a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: "192.0.2.5"})); !blocked(a) {
		t.Fatalf("warm: the live-blocked network: %+v", a)
	}
	if a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: "203.0.113.70"})); !a.allowed() || a.resp.Context["degraded"] != nil {
		t.Fatalf("warm: %+v", a)
	}
	if err := proxy.SetMode(faultproxy.BlackHole); err != nil {
		t.Fatal(err)
	}
	// The next request finds the list older than controls.Propagation and
	// reads it again, into the silence.
	time.Sleep(controls.Propagation + 200*time.Millisecond)
	start := time.Now()
	a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: "203.0.113.71"}))
	took := time.Since(start)
	t.Logf("the request whose read of the network controls failed answered in %s (REDIS_TIMEOUT=%s)", took, timeout)
	if !a.allowed() || a.resp.Context["degraded"] != true {
		t.Fatalf("with Redis hanging: %+v, want a degraded Allow", a)
	}
	// Sharing the budget: about one timeout. Not sharing it would be two
	// (the read's, then the decision's).
	if took >= timeout*17/10 {
		t.Errorf("took %s: the read and the decision did not share one budget of %s", took, timeout)
	}
	for _, ip := range []string{"192.0.2.6", "192.0.2.7"} {
		if a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: ip})); !blocked(a) {
			t.Fatalf("with Redis hanging, %s: %+v, want the last list's block", ip, a)
		}
	}
	rie.WaitLogsContaining("read live network controls: the last list read stays in force")
}
