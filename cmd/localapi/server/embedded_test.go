package server

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// TestEmbeddedRedisRunsEveryScript pins down that `make local`'s embedded
// Redis (miniredis) runs every algorithm's script the way redis-server does
// for the basics: EVALSHA after SCRIPT LOAD, TIME inside the script, a
// request of several checks, Count admitted, the next one denied with a
// Retry-After, and a denial spending nothing. (Everything else about the
// scripts is tested against real redis-server in tests/.)
func TestEmbeddedRedisRunsEveryScript(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := redisclient.New(redisclient.Config{URL: "redis://" + mr.Addr(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	// Without live controls, and with them (the functions' own setting),
	// on keys of their own.
	for _, controls := range []bool{false, true} {
		limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{Timeout: 2 * time.Second, Controls: controls, KeyPrefix: fmt.Sprintf("c%v", controls)})
		if err != nil {
			t.Fatalf("new limiter: %v", err)
		}
		if err := limiter.LoadScripts(ctx); err != nil {
			t.Fatalf("SCRIPT LOAD on miniredis: %v", err)
		}
		t.Run(fmt.Sprintf("controls=%v", controls), func(t *testing.T) { runEveryScript(ctx, t, limiter) })
	}
}

func runEveryScript(ctx context.Context, t *testing.T, limiter *ratelimit.Limiter) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			const count = 3
			tier := ratelimit.Limit{Name: "anonymous", Count: count, Window: time.Minute, Algorithm: alg}
			route := ratelimit.Limit{Name: "route", Count: 100, Window: time.Minute, Algorithm: alg}
			checks := []ratelimit.Check{{Identity: "ip:" + string(alg), Limit: tier}, {Identity: "ip:" + string(alg), Limit: route}}
			admitted := 0
			for i := 0; i < count+2; i++ {
				res, err := limiter.Decide(ctx, 1, checks...)
				if err != nil {
					t.Fatalf("decision %d on miniredis: %v", i, err)
				}
				if !res.Allowed {
					if res.RetryAfter() <= 0 {
						t.Errorf("decision %d: denied without a Retry-After", i)
					}
					continue
				}
				admitted++
			}
			// The leaky bucket admits one at a time (burst 1).
			want := count
			if alg == ratelimit.LeakyBucket {
				want = 1
			}
			if admitted != want {
				t.Errorf("admitted %d of %d, want %d", admitted, count+2, want)
			}
			res, err := peekOn(limiter, ctx, 1, checks...)
			if err != nil {
				t.Fatalf("peek: %v", err)
			}
			if got, wantRemaining := res.Decisions[1].Remaining, route.Burst()-int64(want); got != wantRemaining {
				t.Errorf("route limit remaining %d, want %d: a denial spent", got, wantRemaining)
			}
		})
	}
}

// TestEmbeddedRedisAppliesControls: the live controls `make local` shows
// run on the embedded Redis as on redis-server: a block denies without
// spending, an exemption admits without spending, a scale of 10 admits ten
// times the count, and the network controls read back. As with `make
// local`, the controls are set by another Limiter (the slidegate command's)
// while the deciding one is warm: its control watch (one HGETALL, which
// the embedded Redis answers too) picks the new controls up within
// controls.Propagation, so the test sets them all, waits that long once, and
// then expects each from its first decision.
func TestEmbeddedRedisAppliesControls(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := redisclient.New(redisclient.Config{URL: "redis://" + mr.Addr(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{Timeout: 2 * time.Second, Controls: true})
	if err != nil {
		t.Fatalf("new limiter: %v", err)
	}
	op, err := ratelimit.NewLimiter(client, ratelimit.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("new operator limiter: %v", err)
	}
	ctx := context.Background()
	// Warm: the deciding Limiter's first decision has read the controls
	// (none yet).
	if res, err := limiter.Decide(ctx, 1, ratelimit.Check{Identity: "ip:warm", Limit: ratelimit.Limit{Name: "anonymous", Count: 3, Window: time.Minute}}); err != nil || !res.Allowed || res.Control.Kind != controls.None {
		t.Fatalf("warm-up: %+v %v", res, err)
	}
	until := time.Now().Add(time.Hour)
	set := func(id string, c controls.Control) {
		t.Helper()
		c.Until, c.Reason = until, "embedded test"
		if err := op.Controls().Set(ctx, id, c); err != nil {
			t.Fatalf("set %s control on %s: %v", c.Kind, id, err)
		}
	}
	for _, alg := range ratelimit.Algorithms() {
		set("ip:blocked-"+string(alg), controls.Control{Kind: controls.Block})
		set("ip:exempt-"+string(alg), controls.Control{Kind: controls.Exempt})
		set("ip:scaled-"+string(alg), controls.Control{Kind: controls.Scale, Factor: 10})
	}
	network := netip.MustParsePrefix("192.0.2.0/24")
	if err := op.Controls().SetNetwork(ctx, network, controls.Control{Kind: controls.Block, Until: until, Reason: "embedded test"}); err != nil {
		t.Fatalf("set network control: %v", err)
	}
	time.Sleep(controls.Propagation + 500*time.Millisecond)
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			limit := ratelimit.Limit{Name: "anonymous", Count: 3, Window: time.Minute, Algorithm: alg}
			check := func(id string) ratelimit.Check { return ratelimit.Check{Identity: id + string(alg), Limit: limit} }
			res, err := limiter.Decide(ctx, 1, check("ip:blocked-"))
			if err != nil || res.Allowed || res.Control.Kind != controls.Block || res.RetryAfter() < 59*time.Minute {
				t.Fatalf("blocked: %+v %v, want denied until the block's end", res, err)
			}
			for i := range 10 {
				if res, err := limiter.Decide(ctx, 1, check("ip:exempt-")); err != nil || !res.Allowed || res.Control.Kind != controls.Exempt {
					t.Fatalf("exempt request %d: %+v %v", i+1, res, err)
				}
			}
			admitted := 0
			for range 40 {
				res, err := limiter.Decide(ctx, 1, check("ip:scaled-"))
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed {
					admitted++
				}
				if res.Decisions[0].Limit.Count != 30 {
					t.Fatalf("scaled: limit %d reported, want 30", res.Decisions[0].Limit.Count)
				}
			}
			want := 30
			if alg == ratelimit.LeakyBucket {
				want = 1
			}
			if admitted != want {
				t.Errorf("scaled x10: %d admitted, want %d", admitted, want)
			}
			// Nothing was spent by the block or the exemption.
			for _, id := range []string{"ip:blocked-", "ip:exempt-"} {
				if _, _, err := op.Controls().Lift(ctx, id+string(alg)); err != nil {
					t.Fatal(err)
				}
				res, err := peekOn(limiter, ctx, 1, check(id))
				if err != nil || res.Decisions[0].Remaining != limit.Burst() {
					t.Errorf("%s after lifting: %+v %v, want nothing spent", id, res, err)
				}
			}
		})
	}
	list, err := controls.NewNetworkControlCache(limiter.Controls(), 0).Get(ctx)
	if err != nil || len(list) != 1 || list[0].Prefix != network || list[0].Control.Kind != controls.Block {
		t.Fatalf("network controls %+v %v, want the block of %s", list, err, network)
	}
}

// TestEmbeddedRedisBudget (issue 41): on the embedded Redis the functions'
// budget is EmbeddedRedisTimeout unless the environment gives one; on a
// Redis of REDIS_URL it is the template's (or the environment's). Before:
// the template's 100ms everywhere, which a loaded machine missed.
func TestEmbeddedRedisBudget(t *testing.T) {
	template := map[string]string{"REDIS_TIMEOUT": "100ms"}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		embedded bool
		want     string
	}{
		{"embedded", nil, true, EmbeddedRedisTimeout},
		{"embedded, the environment's", map[string]string{"REDIS_TIMEOUT": "250ms"}, true, "250ms"},
		{"REDIS_URL", nil, false, "100ms"},
		{"REDIS_URL, the environment's", map[string]string{"REDIS_TIMEOUT": "250ms"}, false, "250ms"},
	} {
		env := functionEnv(func(k string) string { return tc.env[k] }, template, "redis://127.0.0.1:1", tc.embedded)
		if got := env("REDIS_TIMEOUT"); got != tc.want {
			t.Errorf("%s: REDIS_TIMEOUT %q, want %q", tc.name, got, tc.want)
		}
	}
	if d, err := time.ParseDuration(EmbeddedRedisTimeout); err != nil || d != time.Second {
		t.Errorf("EmbeddedRedisTimeout %q: %v", EmbeddedRedisTimeout, err)
	}
}

// peekOn is what a Gate on limiter with no deny cache answers a Peek; a
// Redis failure, which the Gate answers Degraded, is returned as the error.
func peekOn(limiter *ratelimit.Limiter, ctx context.Context, cost int64, checks ...ratelimit.Check) (ratelimit.Result, error) {
	res, err := ratelimit.NewGate(limiter, ratelimit.GateOptions{DenyCacheDisabled: true}).Peek(ctx, cost, checks...)
	if err == nil && res.Degraded {
		err = res.Cause
	}
	return res, err
}
