package ratelimit

import (
	"context"
	"fmt"
)

// What the Limiter's tests call of it directly, without a Gate: the
// concurrency calls and one decision of one limit, as the Gate makes them
// but for the failure policy, the breaker and the budget.

// acquireSlot takes one of identity's slots of limit on Redis.
func (l *Limiter) acquireSlot(ctx context.Context, identity string, limit ConcurrencyLimit) (Slot, error) {
	if err := limit.validate(); err != nil {
		return Slot{}, fmt.Errorf("acquire: %w: %w", ErrInvalid, err)
	}
	ctx, cancel := l.budget(ctx)
	defer cancel()
	return l.acquire(ctx, identity, limit, newSlotToken())
}

// peekSlots reports identity's slots of limit on Redis.
func (l *Limiter) peekSlots(ctx context.Context, identity string, limit ConcurrencyLimit) (Slot, error) {
	if err := limit.validate(); err != nil {
		return Slot{}, fmt.Errorf("peek slots: %w: %w", ErrInvalid, err)
	}
	ctx, cancel := l.budget(ctx)
	defer cancel()
	return l.acquire(ctx, identity, limit, "")
}

// releaseSlot gives back a slot acquireSlot took.
func (l *Limiter) releaseSlot(ctx context.Context, slot Slot) (bool, error) {
	if slot.token == "" || slot.Degraded {
		return false, nil
	}
	ctx, cancel := l.budget(ctx)
	defer cancel()
	return l.release(ctx, slot)
}

// allow spends one unit of limit for identity.
func (l *Limiter) allow(ctx context.Context, identity string, limit Limit) (Decision, error) {
	res, err := l.Decide(ctx, 1, Check{Identity: identity, Limit: limit})
	if err != nil {
		return Decision{}, err
	}
	return res.Decisions[0], nil
}

// budget applies Options.Timeout to ctx.
func (l *Limiter) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout > 0 {
		return context.WithTimeout(ctx, l.timeout)
	}
	return ctx, func() {}
}

// peek reports what Decide would answer, spending nothing.
func (l *Limiter) peek(ctx context.Context, cost int64, checks ...Check) (Result, error) {
	return l.decide(ctx, cost, false, checks)
}
