package ratelimit

import (
	"context"
	"errors"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Default circuit-breaker settings, as GateOptions documents them.
const (
	defaultBreakerFailures = 5
	defaultBreakerCooldown = 2 * time.Second
	defaultBreakerWindow   = 10 * time.Second
)

// breakerOptions are GateOptions' Breaker* fields; zero values mean the
// defaults.
type breakerOptions struct {
	disabled bool
	failures int
	cooldown time.Duration
	window   time.Duration
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
func newRedisBreaker(opts breakerOptions, onChange func(from, to string)) *redisBreaker {
	if opts.disabled {
		return &redisBreaker{}
	}
	failures := uint32(defaultBreakerFailures)
	if opts.failures > 0 {
		failures = uint32(opts.failures)
	}
	cooldown := opts.cooldown
	if cooldown <= 0 {
		cooldown = defaultBreakerCooldown
	}
	window := opts.window
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
