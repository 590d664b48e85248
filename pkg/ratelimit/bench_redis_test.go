package ratelimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// BenchmarkDecision measures one decision (one EVALSHA round trip on a
// local redis-server) per algorithm, with allocations, next to the floor of
// any Redis-backed limiter: PING and an EVALSHA of a script that returns 1.
// Compare the lines of one run side by side:
//
//	go test ./tests -run '^$' -bench BenchmarkDecision -benchmem
func BenchmarkDecision(b *testing.B) {
	server := redistest.StartServer(b)
	client := server.Client(b)
	ctx := context.Background()

	b.Run("ceiling/ping", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := client.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ceiling/evalsha-return-1", func(b *testing.B) {
		one := redis.NewScript("return 1")
		if err := one.Load(ctx, client).Err(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := one.EvalSha(ctx, client, []string{"k"}).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})

	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if err := limiter.LoadScripts(ctx); err != nil {
		b.Fatal(err)
	}
	for _, alg := range ratelimit.Algorithms() {
		// A limit no benchmark run can exhaust, over 1,000 identities, so
		// every decision is a full admit-and-write.
		lim := ratelimit.Limit{Name: "user", Count: 1_000_000, Window: 15 * time.Minute, Algorithm: alg}
		if alg == ratelimit.LeakyBucket || alg == ratelimit.SlidingLog {
			// The leaky bucket admits one per interval, and the log keeps
			// one member per admitted unit: keep both realistic.
			lim = ratelimit.Limit{Name: "user", Count: 600, Window: time.Minute, Algorithm: alg}
		}
		ids := make([]string, 1000)
		for i := range ids {
			ids[i] = "bench-user-" + strconv.Itoa(i)
		}
		b.Run("decide/"+string(alg), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := limiter.Decide(ctx, 1, ratelimit.Check{Identity: ids[i%len(ids)], Limit: lim}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	b.Run("decide/sliding-window-tier+route", func(b *testing.B) {
		id := "bench-two-limits"
		checks := []ratelimit.Check{
			{Identity: id, Limit: ratelimit.Limit{Name: "user", Count: 1_000_000, Window: 15 * time.Minute}},
			{Identity: id, Limit: ratelimit.Limit{Name: "GET /v1/*", Count: 1_000_000, Window: 15 * time.Minute}},
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := limiter.Decide(ctx, 1, checks...); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A tier and a route limit of two algorithms, as a login request has
	// (the route a token bucket here, so that every decision admits).
	b.Run("decide/sliding-window-tier+token-bucket-route", func(b *testing.B) {
		id := "bench-two-algorithms"
		checks := []ratelimit.Check{
			{Identity: id, Limit: ratelimit.Limit{Name: "user", Count: 1_000_000, Window: 15 * time.Minute}},
			{Identity: id, Limit: ratelimit.Limit{Name: "POST /auth/*", Count: 1_000_000, Window: 15 * time.Minute, Algorithm: ratelimit.TokenBucket}},
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := limiter.Decide(ctx, 1, checks...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
