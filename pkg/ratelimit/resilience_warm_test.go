package ratelimit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/faultproxy"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestWarmConnectionsThatDiedCostNoError pins warm-process hygiene: pooled
// connections that the server closed while the process sat idle (a frozen
// Lambda, CLIENT KILL, the server's idle timeout) are noticed when taken
// from the pool, so the next decision, even fail-closed, is made on Redis
// without an error and without degrading.
func TestWarmConnectionsThatDiedCostNoError(t *testing.T) {
	server := redistest.StartServer(t)
	admin := server.Client(t)
	ctx := context.Background()

	cases := []struct {
		name string
		kill func(t *testing.T)
	}{
		{"CLIENT KILL of every connection", func(t *testing.T) {
			// Our own admin connection survives (SKIPME yes by default).
			if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Err(); err != nil {
				t.Fatalf("CLIENT KILL: %v", err)
			}
		}},
		{"server idle timeout", func(t *testing.T) {
			if err := admin.ConfigSet(ctx, "timeout", "1").Err(); err != nil {
				t.Fatalf("CONFIG SET timeout: %v", err)
			}
			t.Cleanup(func() { _ = admin.ConfigSet(ctx, "timeout", "0").Err() })
			// The server checks idle clients about every 100 ms (hz 10)
			// once the timeout has passed: wait until it has closed every
			// connection but the one asking.
			waitIdleClosed(t, admin, 10*time.Second)
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := productionClient(t, server.URL(), false)
			gate := productionGate(t, client, fmt.Sprintf("warm%d", i), ratelimit.GateOptions{})
			limit := ratelimit.Limit{Name: "user", Count: 100, Window: time.Minute}
			// Several pooled connections, as after a burst.
			redistest.WarmPool(t, client, 8)
			for range 5 {
				if res, err := gate.Decide(ctx, 1, ratelimit.FailClosed, ratelimit.Check{Identity: "warm", Limit: limit}); err != nil || res.Degraded {
					t.Fatalf("healthy decision: degraded=%v err=%v", res.Degraded, err)
				}
			}
			staleBefore := client.(*redis.Client).PoolStats().StaleConns
			tc.kill(t)
			// Fail-closed: a decision Redis could not make would be
			// ErrUnavailable (rejected), never a fallback's (degraded), so
			// every decision being on Redis is no rejection and no
			// degradation.
			for n := range 10 {
				res, err := gate.Decide(ctx, 1, ratelimit.FailClosed, ratelimit.Check{Identity: fmt.Sprint("after", n), Limit: limit})
				if err != nil || res.Degraded {
					t.Fatalf("decision %d after the server closed the connections: degraded=%v err=%v", n+1, res.Degraded, err)
				}
			}
			// Proof that the fault happened: the pool found dead
			// connections and discarded them before use.
			if stale := client.(*redis.Client).PoolStats().StaleConns - staleBefore; stale == 0 {
				t.Fatal("no pooled connection was found dead: the server did not close them")
			} else {
				t.Logf("%d dead pooled connections discarded on Get", stale)
			}
		})
	}
}

// waitIdleClosed polls the server, on one connection of admin, until that
// connection is the only client left, for at most limit (the test's own
// checks then judge what the server closed).
func waitIdleClosed(t *testing.T, admin *redis.Client, limit time.Duration) {
	t.Helper()
	ctx := context.Background()
	conn := admin.Conn()
	defer conn.Close()
	deadline := time.Now().Add(limit)
	for {
		list, err := conn.ClientList(ctx).Result()
		if err != nil {
			t.Fatalf("CLIENT LIST: %v", err)
		}
		// CLIENT LIST ends every client's line with a newline.
		others := strings.Count(list, "\n") - 1
		if others == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Logf("%d idle connections still open %v after CONFIG SET timeout 1:\n%s", others, limit, list)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestColdStartWithRedisDown starts an instance while Redis refuses
// connections: it serves fail-open requests from the fallback and rejects
// fail-closed ones, and once Redis is reachable its decisions are made on
// Redis again within a few seconds, with no error on the way.
func TestColdStartWithRedisDown(t *testing.T) {
	server := redistest.StartServer(t)
	proxy := faultproxy.StartTest(t, server.Addr())
	proxy.SetModeTest(t, faultproxy.Refuse)

	client := productionClient(t, proxy.URL(), false)
	limiter := productionLimiter(t, client, "cold", 0)
	gate := ratelimit.NewGate(limiter, ratelimit.GateOptions{})
	ctx := context.Background()
	// LoadScripts at cold start fails, as the function's init would see.
	if err := limiter.LoadScripts(ctx); !isUnavailable(err) {
		t.Fatalf("LoadScripts with Redis down: err = %v, want ErrUnavailable", err)
	}
	check := ratelimit.Check{Identity: "198.51.100.20", Limit: ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}}
	var log decisionLog
	for range 20 {
		if _, err := log.decide(gate, ratelimit.FailOpen, check); err != nil {
			t.Fatalf("fail-open decision at cold start: %v", err)
		}
	}
	log.checkWithinBudget(t, "cold start, fail-open")
	if log.degraded != 20 || log.allowed != 3 {
		t.Fatalf("cold start: %d degraded, %d allowed of 20; want all degraded and 30/10 = 3 allowed", log.degraded, log.allowed)
	}
	if _, err := gate.Decide(ctx, 1, ratelimit.FailClosed, check); !isUnavailable(err) {
		t.Fatalf("fail-closed at cold start: err = %v, want ErrUnavailable", err)
	}

	proxy.SetModeTest(t, faultproxy.Pass)
	took := waitShared(t, gate, ratelimit.Check{Identity: "recover", Limit: check.Limit}, 10*time.Second)
	t.Logf("first decision on Redis %v after it became reachable", took.Round(time.Millisecond))
}
