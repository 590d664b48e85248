package tests

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// BenchmarkPlanLimits compares one decision of a plan with three limits
// (a burst, a sustained limit and a longer one, as a list) against one with
// a single limit, on a local redis-server: the time per decision as the
// client sees it, the allocations, and the time Redis itself spent per
// decision (redis-us/op, from INFO commandstats: EVALSHA's usec over its
// calls, reset before each run). Every limit is too large to be exhausted,
// so each decision is a full admit-and-write, over 1,000 identities.
//
//	go test ./tests -run '^$' -bench BenchmarkPlanLimits -benchmem
func BenchmarkPlanLimits(b *testing.B) {
	server := redistest.StartServer(b)
	client := server.Client(b)
	ctx := context.Background()
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "benchplans"})
	if err != nil {
		b.Fatal(err)
	}
	if err := limiter.LoadScripts(ctx); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "key:bench-plan-" + strconv.Itoa(i)
	}
	for _, bc := range []struct{ name, plan string }{
		{"one-limit", "1000000/15m"},
		{"three-limits", "1000000/1s,1000000/1m,1000000/15m"},
	} {
		list, err := config.ParseLimitList("pro", bc.plan, ratelimit.SlidingWindow)
		if err != nil {
			b.Fatal(err)
		}
		req := policy.Rules{CallerRules: policy.CallerRules{Plan: "pro"}, Cost: 1}
		for _, l := range list {
			req.Limits = append(req.Limits, config.OwnedLimit{Limit: l.Limit, Owner: "pro"})
		}
		checks := make([][]ratelimit.Check, len(ids))
		for i, id := range ids {
			checks[i] = req.Checks(id)
		}
		b.Run(bc.name, func(b *testing.B) {
			if err := client.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				res, err := limiter.Decide(ctx, 1, checks[i%len(checks)]...)
				if err != nil || !res.Allowed {
					b.Fatalf("decision %d: %+v, %v", i, res, err)
				}
				i++
			}
			if us, ok := redisUsecPerCall(ctx, b, client, "evalsha"); ok {
				b.ReportMetric(us, "redis-us/op")
			}
		})
	}
}

// redisUsecPerCall reads INFO commandstats: the microseconds Redis spent
// per call of cmd since the last CONFIG RESETSTAT.
func redisUsecPerCall(ctx context.Context, b *testing.B, client redis.UniversalClient, cmd string) (float64, bool) {
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "usec_per_call="); ok {
				f, err := strconv.ParseFloat(v, 64)
				return f, err == nil
			}
		}
	}
	return 0, false
}
