package server

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestEmbeddedRedisRunsEveryScript pins down that `make local`'s embedded
// Redis (miniredis) runs every algorithm's script the way redis-server does
// for the basics: EVALSHA after SCRIPT LOAD, TIME inside the script, a
// request of several checks, Count admitted, the next one denied with a
// Retry-After, and a denial spending nothing. (Everything else about the
// scripts is tested against real redis-server in tests/.)
func TestEmbeddedRedisRunsEveryScript(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := ratelimit.NewClient(ratelimit.ClientConfig{URL: "redis://" + mr.Addr(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("new limiter: %v", err)
	}
	ctx := context.Background()
	if err := limiter.LoadScripts(ctx); err != nil {
		t.Fatalf("SCRIPT LOAD on miniredis: %v", err)
	}
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
			res, err := limiter.Peek(ctx, 1, checks...)
			if err != nil {
				t.Fatalf("peek: %v", err)
			}
			if got, wantRemaining := res.Decisions[1].Remaining, route.Burst()-int64(want); got != wantRemaining {
				t.Errorf("route limit remaining %d, want %d: a denial spent", got, wantRemaining)
			}
		})
	}
}
