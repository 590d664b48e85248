package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestRetryAfterIsExact walks every algorithm through random traffic on an
// injected clock. Whenever a request is denied with RetryAfter r, the same
// request is denied 1 us before r and admitted at r (probed with Peek, which
// spends nothing, so the walk is undisturbed).
func TestRetryAfterIsExact(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, alg := range ratelimit.Algorithms() {
				for _, shape := range []struct {
					count  int64
					window time.Duration
				}{{10, 10 * time.Second}, {7, 3 * time.Second}, {100, time.Minute}, {3, 1001 * time.Millisecond}} {
					name := fmt.Sprintf("%s/%d per %s", alg, shape.count, shape.window)
					t.Run(name, func(t *testing.T) {
						clock := testkit.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
						limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "retry", Now: clock.Now})
						lim := ratelimit.Limit{Name: "user", Count: shape.count, Window: shape.window, Algorithm: alg}
						check := ratelimit.Check{Identity: name, Limit: lim}
						rng := rand.New(rand.NewPCG(uint64(len(name)), uint64(shape.count)))
						ctx := context.Background()
						denials := 0
						for step := 0; step < 400; step++ {
							cost := int64(1)
							if lim.Burst() > 1 && rng.IntN(4) == 0 {
								cost = 1 + rng.Int64N(lim.Burst())
							}
							res, err := limiter.Decide(ctx, cost, check)
							if err != nil {
								t.Fatalf("step %d: %v", step, err)
							}
							if !res.Allowed {
								denials++
								r := res.RetryAfter()
								if r <= 0 {
									t.Fatalf("step %d: denied with RetryAfter %s", step, r)
								}
								probe := func(at time.Duration) bool {
									saved := clock.Now()
									clock.Advance(at)
									defer clock.Set(saved)
									p, err := ratelimit.LimiterPeek(limiter, ctx, cost, check)
									if err != nil {
										t.Fatalf("peek: %v", err)
									}
									return p.Allowed
								}
								if probe(r - time.Microsecond) {
									t.Fatalf("step %d (cost %d): admitted 1us before RetryAfter %s", step, cost, r)
								}
								if !probe(r) {
									t.Fatalf("step %d (cost %d): still denied at RetryAfter %s", step, cost, r)
								}
							}
							// Mostly short gaps so the limit is often hit, with
							// an occasional long pause across windows.
							gap := time.Duration(rng.Int64N(int64(shape.window) / shape.count / 2))
							if rng.IntN(20) == 0 {
								gap = time.Duration(rng.Int64N(int64(2 * shape.window)))
							}
							clock.Advance(gap.Truncate(time.Microsecond))
						}
						if denials < 20 {
							t.Fatalf("only %d denials in the walk: the test did not exercise RetryAfter", denials)
						}
					})
				}
			}
		})
	}
}

// TestBoundaryAttack sends 100 requests in the last 100 ms before a window
// edge and 100 in the first 100 ms after it, at a limit of 100 per minute.
// The fixed window admits all 200 within 200 ms (its known flaw, kept as the
// baseline); the sliding window and the sliding log admit at most 100 in any
// rolling minute.
func TestBoundaryAttack(t *testing.T) {
	const limit = 100
	window := time.Minute
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, alg := range ratelimit.Algorithms() {
				t.Run(string(alg), func(t *testing.T) {
					edge := time.Date(2026, 11, 29, 12, 1, 0, 0, time.UTC) // a multiple of the window
					clock := testkit.NewClock(edge.Add(-100 * time.Millisecond))
					limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "edge", Now: clock.Now})
					lim := ratelimit.Limit{Name: "anonymous", Count: limit, Window: window, Algorithm: alg}
					var admittedAt []time.Time
					for i := range 200 {
						clock.Set(edge.Add(time.Duration(i-100) * time.Millisecond))
						d, err := allowOne(limiter, context.Background(), "boundary-"+string(alg), lim)
						if err != nil {
							t.Fatal(err)
						}
						if d.Allowed {
							admittedAt = append(admittedAt, clock.Now())
						}
					}
					peak := testkit.MaxInRollingWindow(admittedAt, window)
					t.Logf("%s: admitted %d of 200 in 200 ms; most in any rolling %s: %d (%.2fx the limit)",
						alg, len(admittedAt), window, peak, float64(peak)/limit)
					switch alg {
					case ratelimit.FixedWindow:
						if len(admittedAt) != 2*limit {
							t.Fatalf("fixed window admitted %d, expected its boundary flaw to admit %d", len(admittedAt), 2*limit)
						}
					case ratelimit.SlidingWindow, ratelimit.SlidingLog:
						if peak > limit {
							t.Fatalf("%s admitted %d in one rolling window, limit %d", alg, peak, limit)
						}
					}
				})
			}
		})
	}
}

// TestSlidingLogNeverExceedsTheLimitInAnyRollingWindow floods the exact log
// with random traffic for several windows and checks every rolling window.
func TestSlidingLogNeverExceedsTheLimitInAnyRollingWindow(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t)[:1] {
		clock := testkit.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
		limiter := newLimiter(t, topo.NewClient(t), ratelimit.Options{KeyPrefix: "log", Now: clock.Now})
		lim := ratelimit.Limit{Name: "login", Count: 20, Window: 10 * time.Second, Algorithm: ratelimit.SlidingLog}
		rng := rand.New(rand.NewPCG(7, 9))
		var admittedAt []time.Time
		for range 3000 {
			clock.Advance(time.Duration(rng.Int64N(int64(50 * time.Millisecond))).Truncate(time.Microsecond))
			d, err := allowOne(limiter, context.Background(), "flood", lim)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admittedAt = append(admittedAt, clock.Now())
			}
		}
		if peak := testkit.MaxInRollingWindow(admittedAt, lim.Window); peak != int(lim.Count) {
			t.Fatalf("peak in a rolling window = %d, want exactly the limit %d", peak, lim.Count)
		}
	}
}
