package ratelimit

import (
	"context"
	"errors"
	"time"
)

// Default failure-policy settings.
const (
	DefaultFallbackInstances  = 10
	DefaultFallbackMaxEntries = 50_000
)

// GateOptions configure a Gate.
type GateOptions struct {
	// FallbackInstances divides every limit for the local fallback: the
	// expected number of warm instances, each keeping its own
	// (RATE_LIMIT_FALLBACK_INSTANCES). DefaultFallbackInstances when zero.
	FallbackInstances int64
	// FallbackMaxEntries bounds the fallback's memory, in identity-limit
	// pairs. DefaultFallbackMaxEntries when zero.
	FallbackMaxEntries int
	// Now is the process clock of the fallback; time.Now when nil.
	Now func() time.Time
}

// Gate applies slidegate's failure policy around a Limiter. When Redis
// decides, its answer stands. When it cannot (ErrUnavailable), a fail-open
// request is decided by an in-memory fallback limit, per process, with
// each limit divided by the expected number of instances, and the result
// is marked Degraded; a fail-closed request gets the error, never an
// allowance Redis did not give.
type Gate struct {
	limiter  *Limiter
	fallback *fallbackLimiter
}

// NewGate wraps limiter in the failure policy.
func NewGate(limiter *Limiter, opts GateOptions) *Gate {
	instances := opts.FallbackInstances
	if instances <= 0 {
		instances = DefaultFallbackInstances
	}
	entries := opts.FallbackMaxEntries
	if entries <= 0 {
		entries = DefaultFallbackMaxEntries
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Gate{limiter: limiter, fallback: newFallbackLimiter(instances, entries, now)}
}

// Limiter returns the wrapped limiter.
func (g *Gate) Limiter() *Limiter { return g.limiter }

// Decide is Limiter.Decide under the failure policy. failClosed says
// whether this request's route must never pass without Redis's answer.
// Errors are ErrInvalid (bad arguments, never retried) or, for a
// fail-closed request only, ErrUnavailable.
func (g *Gate) Decide(ctx context.Context, cost int64, failClosed bool, checks ...Check) (Result, error) {
	res, err := g.limiter.Decide(ctx, cost, checks...)
	if err == nil || errors.Is(err, ErrInvalid) || failClosed {
		return res, err
	}
	return g.fallback.decide(cost, true, checks), nil
}

// Peek is Limiter.Peek under the failure policy: when Redis cannot answer,
// the fallback's view is returned, marked Degraded.
func (g *Gate) Peek(ctx context.Context, cost int64, checks ...Check) (Result, error) {
	res, err := g.limiter.Peek(ctx, cost, checks...)
	if err == nil || errors.Is(err, ErrInvalid) {
		return res, err
	}
	return g.fallback.decide(cost, false, checks), nil
}
