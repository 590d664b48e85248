package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/faultproxy"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestNetworkFaults drives the production client, limiter and Gate through
// a fault proxy in front of a real redis-server, and through a real
// restart. For every fault: fail-open decisions keep answering within the
// budget, degraded to the local limit (limit / FallbackInstances), with no
// error; fail-closed decisions get ErrUnavailable; with the breaker off,
// every single decision still respects the budget; and once the fault ends,
// decisions are made on Redis again, shared with another instance, within a
// few seconds.
func TestNetworkFaults(t *testing.T) {
	server := redistest.StartServer(t)
	proxy := faultproxy.StartTest(t, server.Addr())

	type fault struct {
		name string
		// url is the address the instance under test dials.
		url    string
		inject func(t *testing.T)
		heal   func(t *testing.T)
	}
	faults := []fault{
		{
			name:   "refused",
			url:    proxy.URL(),
			inject: func(t *testing.T) { proxy.SetModeTest(t, faultproxy.Refuse) },
			heal:   func(t *testing.T) { proxy.SetModeTest(t, faultproxy.Pass) },
		},
		{
			name:   "black hole",
			url:    proxy.URL(),
			inject: func(t *testing.T) { proxy.SetModeTest(t, faultproxy.BlackHole) },
			heal:   func(t *testing.T) { proxy.SetModeTest(t, faultproxy.Pass) },
		},
		{
			name:   "200ms latency",
			url:    proxy.URL(),
			inject: func(t *testing.T) { proxy.SetLatency(200 * time.Millisecond) },
			heal:   func(t *testing.T) { proxy.SetLatency(0) },
		},
		{
			name:   "reset mid-reply",
			url:    proxy.URL(),
			inject: func(t *testing.T) { proxy.SetModeTest(t, faultproxy.Reset) },
			heal:   func(t *testing.T) { proxy.SetModeTest(t, faultproxy.Pass) },
		},
		{
			name:   "restarted empty",
			url:    server.URL(),
			inject: func(t *testing.T) { server.Stop() },
			heal:   func(t *testing.T) { server.Restart(t) },
		},
	}

	// The other instance talks to the server directly: it is the witness
	// that decisions are shared again after the fault.
	witnessClient := productionClient(t, server.URL(), false)

	const fallbackInstances = 10
	limit := ratelimit.Limit{Name: "anonymous", Count: 50, Window: time.Minute}
	for i, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			prefix := fmt.Sprintf("fault%d", i)
			client := productionClient(t, f.url, false)
			opts := ratelimit.GateOptions{FallbackInstances: fallbackInstances}
			var breaker breakerWatch
			watched := opts
			watched.OnBreakerStateChange = breaker.record
			gate := productionGate(t, client, prefix, watched)
			noBreaker := productionGate(t, client, prefix, ratelimit.GateOptions{
				FallbackInstances: fallbackInstances,
				BreakerDisabled:   true,
			})
			witness := productionGate(t, witnessClient, prefix, opts)
			check := func(who string) ratelimit.Check {
				return ratelimit.Check{Identity: "198.51.100.7/" + who, Limit: limit}
			}

			// Warm: the connection is pooled and the script cached.
			for range 3 {
				if res, err := gate.Decide(context.Background(), 1, ratelimit.FailOpen, check("warm")); err != nil || res.Degraded {
					t.Fatalf("healthy decision: degraded=%v err=%v", res.Degraded, err)
				}
			}

			f.inject(t)

			// Every decision of the unprotected gate meets the fault.
			var raw decisionLog
			for range 8 {
				if _, err := raw.decide(noBreaker, ratelimit.FailOpen, check("raw")); err != nil {
					t.Errorf("fail-open decision without breaker returned an error: %v", err)
				}
			}
			raw.checkWithinBudget(t, "no breaker, fail-open")
			if raw.degraded != raw.count {
				t.Errorf("without breaker: %d of %d decisions degraded, want all", raw.degraded, raw.count)
			}

			var open decisionLog
			const attempts = 40
			for range attempts {
				if _, err := open.decide(gate, ratelimit.FailOpen, check("open")); err != nil {
					t.Errorf("fail-open decision returned an error: %v", err)
				}
			}
			open.checkWithinBudget(t, "fail-open")
			if open.degraded != attempts {
				t.Errorf("%d of %d fail-open decisions degraded, want all", open.degraded, attempts)
			}
			if want := int(limit.Count / fallbackInstances); open.allowed != want {
				t.Errorf("fallback admitted %d of %d, want the local limit %d", open.allowed, attempts, want)
			}

			var closed decisionLog
			for range 5 {
				if _, err := closed.decide(gate, ratelimit.FailClosed, check("closed")); !isUnavailable(err) {
					t.Errorf("fail-closed decision: err = %v, want ErrUnavailable", err)
				}
			}
			closed.checkWithinBudget(t, "fail-closed")
			t.Logf("during the fault: breaker %s after %d decisions (%d degraded, %d rejected)", breaker.state(), open.count+closed.count, open.degraded, closed.count)
			if state := breaker.state(); state != "open" {
				t.Errorf("breaker is %s after %d failed decisions, want open", state, open.count+closed.count)
			}

			f.heal(t)
			took := waitShared(t, gate, check("recover"), 10*time.Second)
			t.Logf("decisions made on Redis again %v after the fault ended", took.Round(time.Millisecond))

			// Shared: what this instance spends, the other one sees.
			shared := check("shared")
			for range 3 {
				if res, err := gate.Decide(context.Background(), 1, ratelimit.FailOpen, shared); err != nil || res.Degraded {
					t.Fatalf("decision after recovery: degraded=%v err=%v", res.Degraded, err)
				}
			}
			res, err := witness.Peek(context.Background(), 1, shared)
			if err != nil || res.Degraded {
				t.Fatalf("witness peek: degraded=%v err=%v", res.Degraded, err)
			}
			if got, want := res.Decisions[0].Remaining, limit.Count-3; got != want {
				t.Errorf("other instance sees %d remaining, want %d: decisions are not shared", got, want)
			}
		})
	}
}
