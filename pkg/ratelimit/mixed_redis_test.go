package ratelimit_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// scriptCalls counts the script calls (EVALSHA, EVAL) a client sends.
type scriptCalls struct{ n atomic.Int64 }

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLimitsOfOneIdentityAndSeveralAlgorithms: a request whose limits count
// one identity under different algorithms (a login route's sliding log under
// a sliding-window tier) is decided by one script call, all or nothing: the
// route's denial spends nothing on the tier, and a shadow route never denies.
func TestLimitsOfOneIdentityAndSeveralAlgorithms(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			calls := &scriptCalls{}
			client.AddHook(calls)
			for _, alg := range ratelimit.Algorithms() {
				if alg == ratelimit.SlidingWindow {
					continue
				}
				t.Run(string(alg), func(t *testing.T) {
					ctx := context.Background()
					clock := testkit.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
					limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "mixed", Now: clock.Now})
					id := "caller-" + string(alg)
					tier := ratelimit.Check{Identity: id, Limit: ratelimit.Limit{Name: "user", Count: 600, Window: time.Minute}}
					route := ratelimit.Check{Identity: id, Limit: ratelimit.Limit{Name: "POST /auth/*", Count: 5, Window: time.Minute, Algorithm: alg}}

					calls.n.Store(0)
					admitted := int64(0)
					for range 20 {
						res, err := limiter.Decide(ctx, 1, tier, route)
						if err != nil {
							t.Fatal(err)
						}
						if res.Allowed {
							admitted++
						} else if res.Decisions[1].Allowed || !res.Decisions[0].Allowed {
							t.Fatalf("denial blamed on the wrong limit: %+v", res.Decisions)
						}
						if !res.Allowed && res.RetryAfter() <= 0 {
							t.Fatalf("a denial without RetryAfter: %+v", res.Decisions)
						}
					}
					if got := calls.n.Load(); got != 20 {
						t.Fatalf("%d script calls for 20 decisions, want one each", got)
					}
					if want := expectedBurst(alg, 5); admitted != want {
						t.Fatalf("admitted %d through tier+route, want the route's burst %d", admitted, want)
					}
					assertRemaining(t, limiter, tier, 600-admitted)

					// The same route as a shadow check: nothing is denied,
					// the route reports its denials, and the tier spends.
					shadow := route
					shadow.Identity = id + "-shadow"
					shadow.Shadow = true
					tier.Identity = shadow.Identity
					for i := range 8 {
						res, err := limiter.Decide(ctx, 1, tier, shadow)
						if err != nil {
							t.Fatal(err)
						}
						if !res.Allowed || res.Decisions[1].Allowed != (int64(i) < expectedBurst(alg, 5)) {
							t.Fatalf("request %d under a shadow route: allowed=%v, route %+v", i+1, res.Allowed, res.Decisions[1])
						}
					}
					assertRemaining(t, limiter, tier, 600-8)

					// On Redis's own clock (TIME), as in production.
					prod := newLimiter(t, client, ratelimit.Options{KeyPrefix: "mixed-time"})
					route.Identity = tier.Identity
					res, err := prod.Decide(ctx, 1, tier, route)
					if err != nil || !res.Allowed || res.Decisions[0].At.IsZero() || !res.Decisions[0].At.Equal(res.Decisions[1].At) {
						t.Fatalf("on Redis's clock: %+v, %v; want both limits admitted at one time", res, err)
					}
				})
			}
		})
	}
}
