package ratelimit

import "context"

// LimiterPeek is what Gate.Peek asks the Limiter, with no failure policy,
// breaker or deny cache: for this package's external tests, which pin the
// scripts' answers down.
func LimiterPeek(l *Limiter, ctx context.Context, cost int64, checks ...Check) (Result, error) {
	return l.peek(ctx, cost, checks...)
}

// LimiterAcquire and LimiterRelease are what Gate.Acquire and Gate.Release
// ask the Limiter, likewise.
func LimiterAcquire(l *Limiter, ctx context.Context, identity string, limit ConcurrencyLimit) (Slot, error) {
	return l.acquireSlot(ctx, identity, limit)
}

// LimiterRelease: see LimiterAcquire.
func LimiterRelease(l *Limiter, ctx context.Context, slot Slot) (bool, error) {
	return l.releaseSlot(ctx, slot)
}
