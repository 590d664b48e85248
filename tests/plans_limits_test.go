package tests

import (
	"context"
	"fmt"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/route"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// plansStart is a minute boundary: fixed windows start with the test.
var plansStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// planLimits resolves the limits of one request of a caller of tier and
// plan under env, as the functions do (policy.Stage.Resolve).
func planLimits(t *testing.T, env map[string]string, tier, plan, method, path string) policy.Rules {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("configuration %v: %v", env, err)
	}
	stage := policy.Stage{Limits: config.NewStageCache(cfg, nil).For(nil)}
	return stage.Resolve(policy.Request{Method: method, Path: route.ParsePath(path)}, identity.Caller{Tier: tier, Plan: plan})
}

// decideN decides one request of cost on checks and fails the test on an
// error.
func decideN(t *testing.T, l *ratelimit.Limiter, cost int64, checks []ratelimit.Check) ratelimit.Result {
	t.Helper()
	res, err := l.Decide(context.Background(), cost, checks...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// assertRetryAfterExact: the request is denied now with Retry-After ra;
// made ra - 1µs later it is still denied, made ra later it is admitted.
// Denied requests spend nothing, so the probes change nothing.
func assertRetryAfterExact(t *testing.T, l *ratelimit.Limiter, clock *testkit.Clock, cost int64, checks []ratelimit.Check) time.Duration {
	t.Helper()
	res := decideN(t, l, cost, checks)
	if res.Allowed {
		t.Fatalf("admitted, want a denial: %+v", res.Decisions)
	}
	ra := res.RetryAfter()
	if ra <= 0 {
		t.Fatalf("denied with Retry-After %v", ra)
	}
	start := clock.Now()
	clock.Advance(ra - time.Microsecond)
	if early := decideN(t, l, cost, checks); early.Allowed {
		t.Fatalf("admitted %v after a denial with Retry-After %v: not every limit was waited for", ra-time.Microsecond, ra)
	}
	clock.Set(start.Add(ra))
	if on := decideN(t, l, cost, checks); !on.Allowed {
		t.Fatalf("denied exactly Retry-After %v after the denial: %+v", ra, on.Decisions)
	}
	return ra
}

// TestLimitListDecision: a tier or plan of several limits is decided as one:
// with 2/1s,5/1m bursts are held at 2 a second and the sixth request of a
// minute is denied however it is spaced; a request one limit denies spends
// on none of the others; and Retry-After is the wait after which every
// limit admits, to the microsecond, for every algorithm, on a single
// server and a cluster.
func TestLimitListDecision(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, alg := range ratelimit.Algorithms() {
				t.Run(string(alg), func(t *testing.T) {
					clock := testkit.NewClock(plansStart)
					limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "lists", Now: clock.Now, Timeout: 10 * time.Second})
					env := map[string]string{"RATE_LIMIT_ALGORITHM": string(alg), "RATE_LIMIT_PLANS": "pro=2/1s,5/1m", "RATE_LIMIT_ROUTES": "none"}
					req := planLimits(t, env, identity.TierOrg, "pro", "GET", "/v1/items")
					if len(req.Limits) != 2 || req.Plan != "pro" {
						t.Fatalf("limits of plan pro: %+v", req)
					}
					checksOf := func(id string) []ratelimit.Check { return req.Checks("key:" + id) }

					t.Run("a burst is held at 2 a second, and the denial spends nothing on the minute", func(t *testing.T) {
						checks := checksOf("burst")
						admitted := 0
						for range 5 {
							if decideN(t, limiter, 1, checks).Allowed {
								admitted++
							}
						}
						if want := int(expectedBurst(alg, 2)); admitted != want {
							t.Fatalf("a burst of 5 admitted %d, want %d", admitted, want)
						}
						peek, err := peekOn(limiter, context.Background(), 1, checks...)
						if err != nil {
							t.Fatal(err)
						}
						minute := peek.Decisions[1]
						if want := expectedBurst(alg, 5) - int64(admitted); minute.Remaining != want {
							t.Fatalf("the minute limit has %d left after %d admitted, want %d: the denied requests spent on it", minute.Remaining, admitted, want)
						}
						// A leaky bucket's minute admits one request every 12s,
						// so it denies too; otherwise the second does, alone.
						if peek.Decisions[0].Allowed || minute.Allowed == (alg == ratelimit.LeakyBucket) {
							t.Fatalf("after the burst: %+v, want the 1s limit denying and the minute admitting", peek.Decisions)
						}
						assertRetryAfterExact(t, limiter, clock, 1, checks)
					})

					t.Run("the sixth request of a minute is denied even when spaced", func(t *testing.T) {
						if alg == ratelimit.LeakyBucket {
							t.Skip("a leaky bucket of 5/1m admits one request every 12s: spacing of 1s is its denial, not the sixth's")
						}
						clock.Set(plansStart.Add(time.Hour))
						checks := checksOf("spaced")
						for i := range 5 {
							if res := decideN(t, limiter, 1, checks); !res.Allowed {
								t.Fatalf("spaced request %d denied: %+v", i+1, res.Decisions)
							}
							clock.Advance(time.Second)
						}
						res := decideN(t, limiter, 1, checks)
						if res.Allowed || !res.Decisions[0].Allowed || res.Decisions[1].Allowed {
							t.Fatalf("the sixth spaced request: %+v, want a denial by the minute limit alone", res.Decisions)
						}
						assertRetryAfterExact(t, limiter, clock, 1, checks)
					})

					t.Run("Retry-After waits for every limit that denies", func(t *testing.T) {
						clock.Set(plansStart.Add(2 * time.Hour))
						req := planLimits(t, map[string]string{"RATE_LIMIT_ALGORITHM": string(alg), "RATE_LIMIT_PLANS": "both=2/1s,3/1m", "RATE_LIMIT_ROUTES": "none"},
							identity.TierOrg, "both", "GET", "/v1/items")
						checks := req.Checks("key:both")
						sent := 0
						for sent < 3 {
							if decideN(t, limiter, 1, checks).Allowed {
								sent++
								continue
							}
							clock.Advance(decideN(t, limiter, 1, checks).RetryAfter())
						}
						// The minute is spent; the second may be too.
						res := decideN(t, limiter, 1, checks)
						if res.Allowed || res.Decisions[1].Allowed {
							t.Fatalf("after 3 admitted: %+v", res.Decisions)
						}
						ra := assertRetryAfterExact(t, limiter, clock, 1, checks)
						if ra < res.Decisions[1].RetryAfter || (!res.Decisions[0].Allowed && ra < res.Decisions[0].RetryAfter) {
							t.Fatalf("Retry-After %v is shorter than a denying limit's: %+v", ra, res.Decisions)
						}
					})
				})
			}
		})
	}
}

// TestRouteCostAgainstPlan: a route of cost 10 against a plan of 25/1m
// admits two requests and denies the third, with the exact Retry-After;
// the denied third spends nothing.
func TestRouteCostAgainstPlan(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, alg := range ratelimit.Algorithms() {
				if alg == ratelimit.LeakyBucket {
					continue // a leaky bucket admits one unit at once: a cost of 10 is refused at start (TestCosts)
				}
				t.Run(string(alg), func(t *testing.T) {
					clock := testkit.NewClock(plansStart)
					limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "costs", Now: clock.Now})
					env := map[string]string{
						"RATE_LIMIT_ALGORITHM": string(alg), "RATE_LIMIT_PLANS": "pro=25/1m",
						"RATE_LIMIT_COSTS": "POST /v1/reports=10", "RATE_LIMIT_ROUTES": "none",
					}
					req := planLimits(t, env, identity.TierOrg, "pro", "POST", "/v1/reports")
					if req.Cost != 10 {
						t.Fatalf("cost %d, want 10", req.Cost)
					}
					checks := req.Checks("key:reports")
					for i := range 2 {
						if res := decideN(t, limiter, req.Cost, checks); !res.Allowed || res.Decisions[0].Remaining != 25-10*int64(i+1) {
							t.Fatalf("report %d: %+v", i+1, res.Decisions)
						}
					}
					ra := assertRetryAfterExact(t, limiter, clock, req.Cost, checks)
					if alg == ratelimit.SlidingLog && ra != time.Minute {
						t.Fatalf("sliding-log Retry-After %v, want 1m: the first report's units leave the window then", ra)
					}
					if alg == ratelimit.TokenBucket && ra != 5*(time.Minute/25) {
						t.Fatalf("token-bucket Retry-After %v, want the 5 missing units' refill, %v", ra, 5*(time.Minute/25))
					}
				})
			}
		})
	}
}

// TestShadowPlanLimits: a plan's limit of 3 in shadow admits the fourth
// request and reports it denied; the same limit enforced denies it; and of
// a plan with a shadow limit and an enforced one only the enforced one
// denies. The configuration decides which is which (RATE_LIMIT_SHADOW).
func TestShadowPlanLimits(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			clock := testkit.NewClock(plansStart)
			limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "shadowplans", Now: clock.Now})
			for _, tc := range []struct {
				name, shadow string
				fourth       bool
			}{
				{"shadow", "trial", true},
				{"enforced", "none", false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					req := planLimits(t, map[string]string{"RATE_LIMIT_PLANS": "trial=3/1m", "RATE_LIMIT_SHADOW": tc.shadow, "RATE_LIMIT_ROUTES": "none"},
						identity.TierUser, "trial", "GET", "/v1/items")
					checks := req.Checks("sub:" + tc.name)
					for i := range 3 {
						if res := decideN(t, limiter, 1, checks); !res.Allowed || !res.Decisions[0].Allowed {
							t.Fatalf("request %d: %+v", i+1, res.Decisions)
						}
					}
					res := decideN(t, limiter, 1, checks)
					if res.Allowed != tc.fourth || res.Decisions[0].Allowed || res.Decisions[0].Shadow != tc.fourth {
						t.Fatalf("fourth request: allowed=%v %+v, want allowed=%v with the limit reporting a denial", res.Allowed, res.Decisions, tc.fourth)
					}
				})
			}
			t.Run("one shadow and one enforced limit", func(t *testing.T) {
				req := planLimits(t, map[string]string{"RATE_LIMIT_PLANS": "mix=2/1s,3/1m", "RATE_LIMIT_SHADOW": "mix-1s", "RATE_LIMIT_ROUTES": "none"},
					identity.TierUser, "mix", "GET", "/v1/items")
				checks := req.Checks("sub:mix")
				var got []string
				for range 4 {
					res := decideN(t, limiter, 1, checks)
					got = append(got, fmt.Sprintf("%v(1s:%v,1m:%v)", res.Allowed, res.Decisions[0].Allowed, res.Decisions[1].Allowed))
				}
				// The third is over the shadow 2/1s only: admitted. The
				// fourth is over the enforced 3/1m: denied.
				want := "[true(1s:true,1m:true) true(1s:true,1m:true) true(1s:false,1m:true) false(1s:false,1m:false)]"
				if fmt.Sprint(got) != want {
					t.Fatalf("decisions %v, want %s", got, want)
				}
			})
		})
	}
}
