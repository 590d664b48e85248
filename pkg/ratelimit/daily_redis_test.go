package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestDailyQuotaSlidingWindow pins down the sliding window's long limits,
// 100000/1d and 1000000/1d, whose count x window in microseconds is past the
// scripts' exact range, so they are decided on a millisecond clock: exactly
// count units are admitted in a window, the previous window's count holds
// at the next window's start and weighs half at its middle, and Retry-After
// is the exact wait (the same request then is admitted, 1 us or 1 ms earlier
// it is not). Alone (one limit's spend) and beside another limit (several
// limits), enforced and shadow, on a single server and a cluster.
func TestDailyQuotaSlidingWindow(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	const day = 24 * time.Hour
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, count := range []int64{100000, 1000000} {
				quota := ratelimit.Limit{Name: "pro-1d", Count: count, Window: day}
				if err := quota.Validate(); err != nil {
					t.Fatalf("%s refused: %v", quota, err)
				}
				// The next window admits one unit once count*(W-e) + W <=
				// count*W, i.e. e >= W/count, on the millisecond clock.
				firstNext := time.Duration((day.Milliseconds()+count-1)/count) * time.Millisecond
				for _, beside := range []string{"alone", "beside a 1000000/10s limit"} {
					t.Run(fmt.Sprintf("%d/1d %s", count, beside), func(t *testing.T) {
						ctx := context.Background()
						start := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
						clock := testkit.NewClock(start)
						limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "daily", Now: clock.Now})
						id := fmt.Sprintf("caller-%d-%s", count, beside)
						checks := []ratelimit.Check{{Identity: id, Limit: quota}}
						if beside != "alone" {
							checks = append(checks, ratelimit.Check{Identity: id, Limit: ratelimit.Limit{Name: "pro-10s", Count: 1000000, Window: 10 * time.Second}})
						}
						decide := func(cost int64) ratelimit.Result {
							t.Helper()
							res, err := limiter.Decide(ctx, cost, checks...)
							if err != nil {
								t.Fatal(err)
							}
							return res
						}

						// Exactly count units in the window.
						if res := decide(count - 1); !res.Allowed || res.Decisions[0].Remaining != 1 {
							t.Fatalf("cost %d on a fresh quota: %+v", count-1, res.Decisions[0])
						}
						if res := decide(1); !res.Allowed || res.Decisions[0].Remaining != 0 {
							t.Fatalf("the last unit: %+v", res.Decisions[0])
						}
						res := decide(1)
						if res.Allowed || res.Decisions[0].Allowed {
							t.Fatalf("unit %d admitted: %+v", count+1, res.Decisions[0])
						}
						retry := 18*time.Hour + firstNext
						if got := res.Decisions[0].RetryAfter; got != retry {
							t.Fatalf("RetryAfter %s, want %s (the window's end plus %s)", got, retry, firstNext)
						}
						if got := res.RetryAfter(); got != retry {
							t.Fatalf("the result's RetryAfter %s, want %s", got, retry)
						}

						// At the next window's start the previous window
						// still weighs fully.
						clock.Set(start.Add(18 * time.Hour))
						if res := decide(1); res.Allowed {
							t.Fatalf("admitted at the next window's start: %+v", res.Decisions[0])
						}
						// 1 ms and 1 us before Retry-After: still denied,
						// by exactly that much.
						for _, early := range []time.Duration{time.Millisecond, time.Microsecond} {
							clock.Set(start.Add(retry - early))
							res := decide(1)
							if res.Allowed {
								t.Fatalf("admitted %s before Retry-After", early)
							}
							if got := res.Decisions[0].RetryAfter; got != early {
								t.Fatalf("%s before Retry-After, RetryAfter says %s", early, got)
							}
						}
						clock.Set(start.Add(retry))
						if res := decide(1); !res.Allowed {
							t.Fatalf("denied at Retry-After: %+v", res.Decisions[0])
						}

						// Half-way through the next window, the previous
						// window weighs half: count/2 units in all fit.
						clock.Set(start.Add(18*time.Hour + day/2))
						assertRemaining(t, limiter, checks[0], count/2-1)
						if res := decide(count/2 - 1); !res.Allowed {
							t.Fatalf("cost %d half-way through the window: %+v", count/2-1, res.Decisions[0])
						}
						if res := decide(1); res.Allowed {
							t.Fatalf("past count/2 half-way through the window: %+v", res.Decisions[0])
						}
					})
				}

				t.Run(fmt.Sprintf("%d/1d as a shadow limit", count), func(t *testing.T) {
					ctx := context.Background()
					clock := testkit.NewClock(time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC))
					limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "daily-shadow", Now: clock.Now})
					shadow := ratelimit.Check{Identity: fmt.Sprintf("shadow-%d", count), Limit: quota, Shadow: true}
					if res, err := limiter.Decide(ctx, count, shadow); err != nil || !res.Allowed || !res.Decisions[0].Allowed {
						t.Fatalf("cost %d: %+v, %v", count, res, err)
					}
					res, err := limiter.Decide(ctx, 1, shadow)
					if err != nil || !res.Allowed || res.Decisions[0].Allowed {
						t.Fatalf("a shadow limit past its count: %+v, %v; want admitted, reported denied", res, err)
					}
					if want := 18*time.Hour + firstNext; res.Decisions[0].RetryAfter != want {
						t.Fatalf("shadow RetryAfter %s, want %s", res.Decisions[0].RetryAfter, want)
					}
					// The reported denial spent nothing: count, not count+1.
					clock.Advance(18*time.Hour + day/2)
					assertRemaining(t, limiter, shadow, count/2)
				})
			}
		})
	}
}

// TestDailyQuotaBesideTokenBucketRoute: a 100000/1d sliding-window quota and
// a token-bucket route limit of one identity are decided in one mixed
// script call: a request the quota denies spends nothing on the route, and
// the quota's Retry-After is exact there too.
func TestDailyQuotaBesideTokenBucketRoute(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	const day = 24 * time.Hour
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			calls := &scriptCalls{}
			client.AddHook(calls)
			ctx := context.Background()
			start := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
			clock := testkit.NewClock(start)
			limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "daily-mixed", Now: clock.Now})
			quota := ratelimit.Check{Identity: "caller", Limit: ratelimit.Limit{Name: "pro-1d", Count: 100000, Window: day}}
			route := ratelimit.Check{Identity: "caller", Limit: ratelimit.Limit{Name: "POST /v1/reports", Count: 5, Window: time.Minute, Algorithm: ratelimit.TokenBucket}}

			if res, err := limiter.Decide(ctx, 99999, quota); err != nil || !res.Allowed {
				t.Fatalf("filling the quota: %+v, %v", res, err)
			}
			calls.n.Store(0)
			res, err := limiter.Decide(ctx, 1, quota, route)
			if err != nil || !res.Allowed || res.Decisions[1].Remaining != 4 {
				t.Fatalf("the quota's last unit: %+v, %v", res, err)
			}
			res, err = limiter.Decide(ctx, 1, quota, route)
			if err != nil || res.Allowed || res.Decisions[0].Allowed || !res.Decisions[1].Allowed {
				t.Fatalf("past the quota: %+v, %v; want denied by the quota alone", res, err)
			}
			if got := calls.n.Load(); got != 2 {
				t.Fatalf("%d script calls for 2 decisions", got)
			}
			retry := 18*time.Hour + 864*time.Millisecond
			if got := res.RetryAfter(); got != retry {
				t.Fatalf("RetryAfter %s, want %s", got, retry)
			}
			assertRemaining(t, limiter, route, 4)

			clock.Set(start.Add(retry - time.Millisecond))
			if res, err := limiter.Decide(ctx, 1, quota, route); err != nil || res.Allowed {
				t.Fatalf("1 ms before Retry-After: %+v, %v", res, err)
			}
			clock.Set(start.Add(retry))
			res, err = limiter.Decide(ctx, 1, quota, route)
			if err != nil || !res.Allowed {
				t.Fatalf("at Retry-After: %+v, %v", res, err)
			}
			// The route's bucket refilled meanwhile; this request spent one.
			if got := res.Decisions[1].Remaining; got != 4 {
				t.Fatalf("route remaining %d, want 4", got)
			}
		})
	}
}

// TestDailyQuotaFixedWindow: the fixed window compares counts only, so a
// daily quota of 1,000,000 needs no other clock: count units in the aligned
// day, then a denial whose Retry-After is the day's end, exactly.
func TestDailyQuotaFixedWindow(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			ctx := context.Background()
			start := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
			clock := testkit.NewClock(start)
			limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "daily-fixed", Now: clock.Now})
			quota := ratelimit.Check{Identity: "caller", Limit: ratelimit.Limit{Name: "pro-1d", Count: 1000000, Window: 24 * time.Hour, Algorithm: ratelimit.FixedWindow}}
			if res, err := limiter.Decide(ctx, 1000000, quota); err != nil || !res.Allowed || res.Decisions[0].Remaining != 0 {
				t.Fatalf("the whole quota at once: %+v, %v", res, err)
			}
			res, err := limiter.Decide(ctx, 1, quota)
			if err != nil || res.Allowed || res.RetryAfter() != 18*time.Hour {
				t.Fatalf("past the quota: %+v, %v; want denied until the day's end (18h)", res, err)
			}
			clock.Set(start.Add(18*time.Hour - time.Microsecond))
			if res, err := limiter.Decide(ctx, 1, quota); err != nil || res.Allowed {
				t.Fatalf("1 us before the day's end: %+v, %v", res, err)
			}
			clock.Set(start.Add(18 * time.Hour))
			if res, err := limiter.Decide(ctx, 1, quota); err != nil || !res.Allowed {
				t.Fatalf("at the day's end: %+v, %v", res, err)
			}
		})
	}
}
