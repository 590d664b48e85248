package ratelimit

import (
	"context"
	"errors"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Default circuit-breaker settings, as BreakerOptions documents them.
const (
	defaultBreakerFailures = 5
	defaultBreakerCooldown = 2 * time.Second
	defaultBreakerWindow   = 10 * time.Second
)

// BreakerOptions configure the circuit breaker a Gate keeps around Redis.
//
// The breaker opens when the last Failures decisions in a row could not be
// made on Redis and at least half of the decisions in the last Window
// failed. Requiring both keeps one dead shard of a cluster (a third of the
// decisions failing, in runs) from cutting every caller off a healthy
// majority, while a Redis that is down for everyone trips it within
// Failures decisions. While open, no decision calls Redis: fail-open
// requests are decided by the fallback, fail-closed ones get ErrUnavailable
// at once. After Cooldown, one decision is let through as a probe; if Redis
// answers it the breaker closes, otherwise it opens for another Cooldown.
type BreakerOptions struct {
	// Disabled turns the breaker off: every decision calls Redis.
	Disabled bool
	// Failures is how many decisions in a row must fail to open the
	// breaker; 5 when zero.
	Failures int
	// Cooldown is how long the breaker stays open before probing; 2s when
	// zero.
	Cooldown time.Duration
	// Window is the rolling period over which the failure ratio is
	// counted; 10s when zero.
	Window time.Duration
}

// errCallerGone marks a decision abandoned because the caller's own context
// ended: it says nothing about Redis, so the breaker does not count it.
var errCallerGone = errors.New("caller's context ended")

// redisBreaker is the circuit breaker of one Gate; nil-safe when disabled.
type redisBreaker struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]
}

// newRedisBreaker builds the breaker; onChange, when not nil, is told of
// every state change (see GateOptions.OnBreakerStateChange).
func newRedisBreaker(opts BreakerOptions, onChange func(from, to string)) *redisBreaker {
	if opts.Disabled {
		return &redisBreaker{}
	}
	failures := uint32(defaultBreakerFailures)
	if opts.Failures > 0 {
		failures = uint32(opts.Failures)
	}
	cooldown := opts.Cooldown
	if cooldown <= 0 {
		cooldown = defaultBreakerCooldown
	}
	window := opts.Window
	if window <= 0 {
		window = defaultBreakerWindow
	}
	bucket := max(window/10, time.Millisecond)
	var onStateChange func(string, gobreaker.State, gobreaker.State)
	if onChange != nil {
		onStateChange = func(_ string, from, to gobreaker.State) { onChange(from.String(), to.String()) }
	}
	return &redisBreaker{cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         "redis",
		MaxRequests:  1,
		Interval:     window,
		BucketPeriod: bucket,
		Timeout:      cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= failures && 2*uint64(c.TotalFailures) >= uint64(c.Requests)
		},
		IsExcluded:    func(err error) bool { return errors.Is(err, errCallerGone) },
		OnStateChange: onStateChange,
	})}
}

// allow reports whether a decision may call Redis, and if so returns the
// function that records its outcome. It never blocks.
func (b *redisBreaker) allow() (done func(err error, callerCtx context.Context), ok bool) {
	if b.cb == nil {
		return func(error, context.Context) {}, true
	}
	record, err := b.cb.Allow()
	if err != nil {
		return nil, false
	}
	return func(err error, callerCtx context.Context) {
		switch {
		case err == nil || errors.Is(err, ErrInvalid):
			record(nil)
		case callerCtx.Err() != nil:
			record(errCallerGone)
		default:
			record(err)
		}
	}, true
}

func (b *redisBreaker) state() string {
	if b.cb == nil {
		return "disabled"
	}
	return b.cb.State().String()
}
