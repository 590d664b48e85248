package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestShadowChecks pins down what a shadow check is, for every algorithm on
// a single server and a cluster: it is decided and reported but never
// denies; it spends only when the request is admitted and it admits on its
// own, so that its state is the one enforcing it would have left; and a
// denied request spends nothing on it.
func TestShadowChecks(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, alg := range ratelimit.Algorithms() {
				t.Run(string(alg), func(t *testing.T) {
					clock := testkit.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
					limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "shadow", Now: clock.Now})
					limit := func(name string, count int64) ratelimit.Limit {
						return ratelimit.Limit{Name: name, Count: count, Window: time.Minute, Algorithm: alg}
					}
					// A leaky bucket admits one request at an instant: its
					// enforced limit of 100 needs the clock to move by its
					// interval between requests, the others stand still.
					var step time.Duration
					tierLeft := expectedBurst(alg, 100) - expectedBurst(alg, 3) - 2
					if alg == ratelimit.LeakyBucket {
						step, tierLeft = time.Minute/100, 0
					}
					t.Run("a shadow limit alone admits past its burst and reports the denial", func(t *testing.T) {
						shadow := ratelimit.Check{Identity: "alone-" + string(alg), Limit: limit("trial", 3), Shadow: true}
						assertShadowOverflow(t, limiter, clock, step, expectedBurst(alg, 3), 2, 0, shadow)
					})
					t.Run("an enforced and a shadow limit of one identity", func(t *testing.T) {
						id := "pair-" + string(alg)
						enforced := ratelimit.Check{Identity: id, Limit: limit("tier", 100)}
						shadow := ratelimit.Check{Identity: id, Limit: limit("trial", 3), Shadow: true}
						assertShadowOverflow(t, limiter, clock, step, expectedBurst(alg, 3), 2, 1, enforced, shadow)
						assertRemaining(t, limiter, enforced, tierLeft)
					})
					t.Run("an enforced and a shadow limit of two identities", func(t *testing.T) {
						enforced := ratelimit.Check{Identity: "ip-" + string(alg), Limit: limit("tier", 100)}
						shadow := ratelimit.Check{Identity: "key-" + string(alg), Limit: limit("trial", 3), Shadow: true}
						assertShadowOverflow(t, limiter, clock, step, expectedBurst(alg, 3), 2, 0, shadow, enforced)
						assertRemaining(t, limiter, enforced, tierLeft)
					})
					t.Run("a denied request spends nothing on a shadow limit", func(t *testing.T) {
						id := "denied-" + string(alg)
						enforced := ratelimit.Check{Identity: id, Limit: limit("tier", 2)}
						shadow := ratelimit.Check{Identity: id, Limit: limit("trial", 10), Shadow: true}
						admitted := int64(0)
						for range 8 {
							res, err := limiter.Decide(context.Background(), 1, enforced, shadow)
							if err != nil {
								t.Fatal(err)
							}
							// The shadow limit has spent what was admitted.
							if room := admitted < expectedBurst(alg, 10); res.Decisions[1].Allowed != room {
								t.Fatalf("after %d admitted the shadow limit says allowed=%v: %+v", admitted, res.Decisions[1].Allowed, res.Decisions)
							}
							if res.Allowed {
								admitted++
							}
						}
						if want := expectedBurst(alg, 2); admitted != want {
							t.Fatalf("admitted %d, want the enforced burst %d", admitted, want)
						}
						assertRemaining(t, limiter, ratelimit.Check{Identity: id, Limit: shadow.Limit}, expectedBurst(alg, 10)-admitted)
					})
					t.Run("a shadow limit's state is the enforced one's", func(t *testing.T) {
						assertShadowTracksEnforced(t, limiter, clock, alg)
					})
				})
			}
		})
	}
}

// assertShadowOverflow sends burst+extra requests of cost 1, step apart,
// and checks that all are admitted while the shadow check (checks[shadowAt])
// reports the last extra ones denied, with a RetryAfter that the result's
// own RetryAfter and Closest leave out.
func assertShadowOverflow(t *testing.T, limiter *ratelimit.Limiter, clock *testkit.Clock, step time.Duration, burst, extra int64, shadowAt int, checks ...ratelimit.Check) {
	t.Helper()
	for i := range burst + extra {
		if i > 0 {
			clock.Advance(step)
		}
		res, err := limiter.Decide(context.Background(), 1, checks...)
		if err != nil {
			t.Fatal(err)
		}
		d := res.Decisions[shadowAt]
		if !res.Allowed {
			t.Fatalf("request %d denied with a shadow limit only in the way: %+v", i+1, res.Decisions)
		}
		if !d.Shadow {
			t.Fatalf("request %d: the shadow check's decision is not marked Shadow", i+1)
		}
		wantAllowed := i < burst
		if d.Allowed != wantAllowed {
			t.Fatalf("request %d: the shadow decision says allowed=%v, want %v (burst %d)", i+1, d.Allowed, wantAllowed, burst)
		}
		if !wantAllowed && d.RetryAfter <= 0 {
			t.Fatalf("request %d: the shadow denial has no RetryAfter: %+v", i+1, d)
		}
		if res.RetryAfter() != 0 {
			t.Fatalf("request %d: Result.RetryAfter = %v for an admitted request", i+1, res.RetryAfter())
		}
		if len(checks) > 1 && httplimit.Closest(res).Shadow {
			t.Fatalf("request %d: Closest picked the shadow decision over an enforced one", i+1)
		}
	}
}

// assertRemaining peeks at check as an enforced check.
func assertRemaining(t *testing.T, limiter *ratelimit.Limiter, check ratelimit.Check, want int64) {
	t.Helper()
	check.Shadow = false
	res, err := ratelimit.LimiterPeek(limiter, context.Background(), 1, check)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Decisions[0].Remaining; got != want {
		t.Fatalf("%s has %d remaining, want %d", check.Limit.Name, got, want)
	}
}

// assertShadowTracksEnforced drives three identities with the same traffic
// over a few minutes: one under an enforced limit, one under the same limit as
// a lone shadow check, one under it as a shadow check next to a generous
// enforced limit. Every decision of the shadow checks must be the enforced
// one's, and so must the state they are left with.
func assertShadowTracksEnforced(t *testing.T, limiter *ratelimit.Limiter, clock *testkit.Clock, alg ratelimit.Algorithm) {
	t.Helper()
	ctx := context.Background()
	l := ratelimit.Limit{Name: "trial", Count: 5, Window: time.Minute, Algorithm: alg}
	generous := ratelimit.Limit{Name: "tier", Count: 1000, Window: time.Minute, Algorithm: alg}
	enforced := ratelimit.Check{Identity: "track-enforced-" + string(alg), Limit: l}
	alone := ratelimit.Check{Identity: "track-alone-" + string(alg), Limit: l, Shadow: true}
	paired := ratelimit.Check{Identity: "track-paired-" + string(alg), Limit: l, Shadow: true}
	pairedTier := ratelimit.Check{Identity: paired.Identity, Limit: generous}
	// Steps of 100 ms or more: the generous limit (a leaky bucket's
	// interval is 60 ms) never denies.
	const tick = 100 * time.Millisecond
	steps := []time.Duration{tick, tick, 3 * time.Second, tick, tick, tick, tick, 11 * time.Second, tick, 20 * time.Second, tick, tick, tick,
		31 * time.Second, tick, tick, 9 * time.Second, tick, tick, tick, tick, tick, 45 * time.Second, tick, 12 * time.Second, tick, tick}
	for i, step := range steps {
		clock.Advance(step)
		want, err := limiter.Decide(ctx, 1, enforced)
		if err != nil {
			t.Fatal(err)
		}
		got1, err := limiter.Decide(ctx, 1, alone)
		if err != nil {
			t.Fatal(err)
		}
		got2, err := limiter.Decide(ctx, 1, pairedTier, paired)
		if err != nil {
			t.Fatal(err)
		}
		if !got1.Allowed || !got2.Allowed {
			t.Fatalf("step %d: a shadow check denied a request", i)
		}
		w := want.Decisions[0]
		for _, g := range []ratelimit.Decision{got1.Decisions[0], got2.Decisions[1]} {
			if g.Allowed != w.Allowed || g.Remaining != w.Remaining || g.ResetAfter != w.ResetAfter || g.RetryAfter != w.RetryAfter {
				t.Fatalf("step %d: shadow decision %+v, enforced %+v", i, g, w)
			}
		}
	}
	peek, err := ratelimit.LimiterPeek(limiter, ctx, 1, enforced)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []ratelimit.Check{alone, paired} {
		c.Shadow = false
		got, err := ratelimit.LimiterPeek(limiter, ctx, 1, c)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := got.Decisions[0], peek.Decisions[0]; g.Remaining != w.Remaining || g.ResetAfter != w.ResetAfter || g.RetryAfter != w.RetryAfter {
			t.Fatalf("state after %d requests: shadow %+v, enforced %+v", len(steps), g, w)
		}
	}
}
