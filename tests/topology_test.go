package tests

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// newLimiter builds a limiter on client with its scripts loaded. Callers
// give each subtest its own key prefix, so that subtests sharing a server
// never share state. (pkg/ratelimit's behaviour tests have the same
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

// peekOn is what a Gate on limiter with no deny cache answers a Peek (the
// limiter's Options.Timeout is the Gate's budget); a Redis failure, which
// the Gate answers Degraded from its fallback, is returned as the error.
func peekOn(limiter *ratelimit.Limiter, ctx context.Context, cost int64, checks ...ratelimit.Check) (ratelimit.Result, error) {
	res, err := ratelimit.NewGate(limiter, ratelimit.GateOptions{DenyCacheDisabled: true}).Peek(ctx, cost, checks...)
	if err == nil && res.Degraded {
		err = res.Cause
	}
	return res, err
}

// expectedBurst is how many requests of cost 1 an algorithm admits at one
// instant for a limit of count per window.
func expectedBurst(a ratelimit.Algorithm, count int64) int64 {
	if a == ratelimit.LeakyBucket {
		return 1
	}
	return count
}
