package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Defaults of GateOptions, as it documents them.
const (
	defaultFallbackInstances  = 10
	defaultFallbackMaxEntries = 50_000
	defaultDenyCacheEntries   = 10_000
)

// GateOptions configure a Gate. The zero value is ready for production.
//
// The circuit breaker around Redis opens when the last BreakerFailures
// decisions in a row could not be made on Redis and at least half of the
// decisions in the last BreakerWindow failed. Requiring both keeps one dead
// shard of a cluster (a third of the decisions failing, in runs) from
// cutting every caller off a healthy majority, while a Redis that is down
// for everyone trips it within BreakerFailures decisions. While it is open
// no decision calls Redis: fail-open requests are decided by the fallback,
// fail-closed ones get ErrUnavailable at once. After BreakerCooldown one
// decision is let through as a probe; if Redis answers it the breaker
// closes, otherwise it opens for another BreakerCooldown.
type GateOptions struct {
	// FallbackInstances divides every limit for the local fallback: the
	// expected number of warm instances, each keeping its own; 10 when
	// zero. Each instance then admits Count/FallbackInstances per Window,
	// rounded up, while Redis is out of reach.
	FallbackInstances int64
	// FallbackMaxEntries bounds the fallback's memory, in identity-limit
	// pairs; 50,000 when zero.
	FallbackMaxEntries int

	// BreakerDisabled turns the breaker off: every decision calls Redis.
	BreakerDisabled bool
	// BreakerFailures is how many decisions in a row must fail to open
	// the breaker; 5 when zero.
	BreakerFailures int
	// BreakerCooldown is how long the breaker stays open before probing;
	// 2s when zero.
	BreakerCooldown time.Duration
	// BreakerWindow is the rolling period over which the failure ratio is
	// counted; 10s when zero.
	BreakerWindow time.Duration
	// OnBreakerStateChange, when set, is called on every state change of
	// the circuit breaker, with the states' names ("closed", "open",
	// "half-open"): closed to open when Redis keeps failing, open to
	// half-open when the cool-down has passed (noticed by the first
	// decision after it, not by a timer), and half-open to closed or back
	// to open by the probe's result. It is called synchronously by the
	// decision that causes the change, while the breaker holds its lock:
	// it must return quickly and must not call the Gate. Never called when
	// the breaker is disabled.
	OnBreakerStateChange func(from, to string)

	// DenyCacheDisabled turns the deny cache off: every request then costs
	// a Redis call, even from a caller already denied.
	DenyCacheDisabled bool
	// DenyCacheMaxEntries bounds the deny cache, in remembered denials.
	// 10,000 when zero.
	DenyCacheMaxEntries int
}

// Gate applies a failure policy around a Limiter.
//
// When Redis decides, its answer stands. When it cannot (ErrUnavailable:
// refused, reset, too slow, or the circuit breaker is open), a fail-open
// request is decided by an in-memory fallback limit, per process, with each
// limit divided by the expected number of instances, and the result is
// marked Degraded; a fail-closed request gets the error, never an allowance
// Redis did not give.
//
// A caller Redis denied until T is denied again from memory, without a Redis
// call, until T measured on the local clock from the moment the denied
// request was sent: never later than Redis itself would admit it. When the
// Limiter reads live controls (Options.Controls), no denial is remembered
// longer than controls.Propagation, so that a lifted block or a new
// exemption reaches a warm instance within that bound plus one request.
// The in-memory fallback knows no controls: while Redis is out of reach, a
// blocked caller is limited by the fallback's limits like any other, an
// exempt or scaled one by the configured limits.
//
// One decision takes at most the Limiter's Options.Timeout (100 ms when
// zero) plus the time to notice it has passed; while the breaker is open it
// takes no Redis time at all. A Gate is safe for concurrent use.
type Gate struct {
	limiter  *Limiter
	fallback *fallbackLimiter
	slots    *slotFallback // concurrency limits' fallback (concurrency_gate.go)
	breaker  *redisBreaker
	denied   *denyCache // nil when disabled
	timeout  time.Duration
	now      func() time.Time
	counters gateCounters
}

// NewGate wraps limiter in the failure policy. The fallback and the deny
// cache keep time on the process clock, or on the Limiter's Options.Now
// when it has one.
func NewGate(limiter *Limiter, opts GateOptions) *Gate {
	var now func() time.Time
	if limiter != nil {
		now = limiter.now
	}
	return newGate(limiter, opts, now)
}

// newGate is NewGate with the fallback's and the deny cache's clock; nil
// is time.Now.
func newGate(limiter *Limiter, opts GateOptions, now func() time.Time) *Gate {
	instances := opts.FallbackInstances
	if instances <= 0 {
		instances = defaultFallbackInstances
	}
	entries := opts.FallbackMaxEntries
	if entries <= 0 {
		entries = defaultFallbackMaxEntries
	}
	if now == nil {
		now = time.Now
	}
	// One budget per decision: the Limiter's, which the Gate applies
	// itself around every Redis round trip of the decision.
	timeout := defaultTimeout
	if limiter != nil && limiter.timeout > 0 {
		timeout = limiter.timeout
	}
	g := &Gate{
		limiter:  limiter,
		fallback: newFallbackLimiter(instances, entries, now),
		slots:    newSlotFallback(instances, entries, now),
		breaker: newRedisBreaker(breakerOptions{
			disabled: opts.BreakerDisabled,
			failures: opts.BreakerFailures,
			cooldown: opts.BreakerCooldown,
			window:   opts.BreakerWindow,
		}, opts.OnBreakerStateChange),
		timeout: timeout,
		now:     now,
	}
	if limiter != nil {
		g.fallback.hashKey = limiter.keys.hashKey
		g.slots.hashKey = limiter.keys.hashKey
	}
	if !opts.DenyCacheDisabled {
		size := opts.DenyCacheMaxEntries
		if size <= 0 {
			size = defaultDenyCacheEntries
		}
		var hold time.Duration
		if limiter != nil && limiter.controls {
			hold = controls.Propagation
		}
		g.denied = newDenyCache(size, hold)
	}
	return g
}

// FailurePolicy says what Gate.Decide answers for a request Redis could not
// decide. The zero value is FailOpen.
type FailurePolicy int

const (
	// FailOpen decides the request with the in-memory fallback limit and
	// marks the Result Degraded.
	FailOpen FailurePolicy = iota
	// FailClosed answers ErrUnavailable: the request must never pass
	// without Redis's answer.
	FailClosed
)

// Decide is Limiter.Decide under the failure policy: policy says what
// happens when Redis cannot decide. Errors are ErrInvalid (bad arguments,
// never retried) or, under FailClosed only, ErrUnavailable. With ErrUnavailable the Result
// is not a decision: it holds only RedisLatency, the time the failed
// attempt took (zero when the circuit breaker was open).
func (g *Gate) Decide(ctx context.Context, cost int64, policy FailurePolicy, checks ...Check) (Result, error) {
	g.counters.decisions.Add(1)
	res, err := g.decideOnRedis(ctx, cost, true, checks)
	if err == nil || errors.Is(err, ErrInvalid) {
		return res, err
	}
	if policy == FailClosed {
		g.counters.rejected.Add(1)
		return Result{RedisLatency: res.RedisLatency}, err
	}
	g.counters.degraded.Add(1)
	return g.degrade(res.RedisLatency, err, cost, true, checks), nil
}

// Peek reports what Decide would answer for a request of cost, without
// spending anything or writing to Redis: the caller's quota, for a status
// endpoint or a dry run. When Redis cannot answer,
// the fallback's view is returned, marked Degraded. A caller still denied
// from memory is shown that denial.
func (g *Gate) Peek(ctx context.Context, cost int64, checks ...Check) (Result, error) {
	g.counters.decisions.Add(1)
	res, err := g.decideOnRedis(ctx, cost, false, checks)
	if err == nil || errors.Is(err, ErrInvalid) {
		return res, err
	}
	g.counters.degraded.Add(1)
	return g.degrade(res.RedisLatency, err, cost, false, checks), nil
}

// degrade is the fallback's decision when Redis could not decide, with the
// time the failed Redis attempt took and why it failed.
func (g *Gate) degrade(redisLatency time.Duration, cause error, cost int64, spend bool, checks []Check) Result {
	res := g.fallback.decide(cost, spend, checks)
	res.RedisLatency = redisLatency
	res.Cause = cause
	return res
}

// decideOnRedis validates the request, answers from the deny cache when it
// can, and otherwise asks Redis through the breaker, within the budget. When Redis was asked, the
// Result's RedisLatency is the time that took, also with an error (then the
// Result holds nothing else).
func (g *Gate) decideOnRedis(ctx context.Context, cost int64, spend bool, checks []Check) (Result, error) {
	if err := validate(cost, checks); err != nil {
		return Result{}, err
	}
	var key denyKey
	if g.denied != nil {
		key = newDenyKey(cost, checks)
		if res, ok := g.denied.lookup(key, g.now()); ok {
			g.counters.denyCacheHits.Add(1)
			return res, nil
		}
	}
	done, ok := g.breaker.allow()
	if !ok {
		g.counters.breakerSkips.Add(1)
		return Result{}, fmt.Errorf("%w: circuit breaker open after repeated Redis failures", ErrUnavailable)
	}
	budget, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	sent := g.now()
	g.counters.redisCalls.Add(1)
	started := time.Now()
	res, err := g.limiter.run(budget, cost, spend, checks)
	elapsed := time.Since(started)
	done(err, ctx)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			g.reloadClusterMap()
		}
		// A failure's time is Redis time too: timeouts and errors must
		// reach the RedisLatency alarm.
		return Result{RedisLatency: elapsed}, err
	}
	res.RedisLatency = elapsed
	if g.denied != nil && !res.Allowed {
		g.denied.remember(key, sent, res)
	}
	return res, nil
}

// reloadClusterMap asks a cluster client to refresh its slot map in the
// background. go-redis refreshes it on MOVED and ASK but not on connection
// errors: after a master dies, its slots would otherwise keep being sent to
// the dead address until the periodic reload, long after a replica took
// over. Reloads are coalesced and rate-limited by go-redis.
func (g *Gate) reloadClusterMap() {
	if cluster, ok := g.limiter.client.(*redis.ClusterClient); ok {
		cluster.ReloadState(context.Background())
	}
}

type gateCounters struct {
	decisions, redisCalls, degraded, rejected, denyCacheHits, breakerSkips atomic.Uint64
}
