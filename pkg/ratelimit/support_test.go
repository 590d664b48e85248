package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// newLimiter builds a limiter on client with its scripts loaded. Callers
// give each subtest its own key prefix, so that subtests sharing a server
// never share state. (tests/ has the same
// helper: a test package cannot import another's.)
func newLimiter(t testing.TB, client redis.UniversalClient, opts ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.NewLimiter(client, opts)
	if err != nil {
		t.Fatalf("new limiter: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.LoadScripts(ctx); err != nil {
		t.Fatalf("load scripts: %v", err)
	}
	return l
}

// expectedBurst is how many requests of cost 1 an algorithm admits at one
// instant for a limit of count per window.
func expectedBurst(a ratelimit.Algorithm, count int64) int64 {
	if a == ratelimit.LeakyBucket {
		return 1
	}
	return count
}

// allowOne spends one unit of limit for identity and returns its Decision.
func allowOne(l *ratelimit.Limiter, ctx context.Context, identity string, limit ratelimit.Limit) (ratelimit.Decision, error) {
	res, err := l.Decide(ctx, 1, ratelimit.Check{Identity: identity, Limit: limit})
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return res.Decisions[0], nil
}
