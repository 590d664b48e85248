package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Acquire is Limiter.Acquire under the failure policy, within the Gate's
// budget (the Limiter's Options.Timeout, 100 ms when zero) and through its
// circuit breaker, as a rate decision is. When Redis cannot decide, a
// FailOpen acquire takes a slot of the Gate's local count instead (each
// limit's Max divided by GateOptions.FallbackInstances, rounded up, at
// least 1; leases on the process's clock) and the Slot is Degraded; a
// FailClosed acquire gets ErrUnavailable, with a Slot holding only its
// RedisLatency. Denials are not cached: a Release may free a slot at any
// moment.
func (g *Gate) Acquire(ctx context.Context, policy FailurePolicy, identity string, limit ConcurrencyLimit) (Slot, error) {
	if err := limit.Validate(); err != nil {
		return Slot{}, fmt.Errorf("acquire: %w: %w", ErrInvalid, err)
	}
	slot, err := g.acquireOnRedis(ctx, identity, limit)
	if err == nil {
		return slot, nil
	}
	if policy == FailClosed {
		return Slot{RedisLatency: slot.RedisLatency}, err
	}
	local := g.slots.acquire(identity, limit, true)
	local.RedisLatency, local.Cause = slot.RedisLatency, err
	return local, nil
}

// acquireOnRedis asks Redis through the breaker, within the budget.
func (g *Gate) acquireOnRedis(ctx context.Context, identity string, limit ConcurrencyLimit) (Slot, error) {
	done, ok := g.breaker.allow()
	if !ok {
		return Slot{}, fmt.Errorf("acquire %q: %w: circuit breaker open after repeated Redis failures", limit.Name, ErrUnavailable)
	}
	budget, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	started := time.Now()
	slot, err := g.limiter.acquire(budget, identity, limit, newSlotToken())
	elapsed := time.Since(started)
	done(err, ctx)
	if err != nil {
		g.reloadClusterMap()
		return Slot{RedisLatency: elapsed}, err
	}
	slot.RedisLatency = elapsed
	return slot, nil
}

// Release gives back a slot taken by Acquire: a Degraded slot to the local
// count, any other on Redis (Limiter.Release), within the Gate's budget and
// through its breaker. When Redis cannot be reached (or the breaker is
// open) the error wraps ErrUnavailable and the slot stays held on Redis
// until its lease ends; there is nothing else to do about it, so callers
// log it and go on. A Slot not Acquired is a no-op.
//
// ctx should be the caller's own, not the request's, which may have ended
// (context.WithoutCancel of it keeps its values): a release cut short
// leaves the slot held for its whole lease.
func (g *Gate) Release(ctx context.Context, slot Slot) (bool, error) {
	if slot.token == "" {
		return false, nil
	}
	if slot.Degraded {
		return g.slots.release(slot), nil
	}
	done, ok := g.breaker.allow()
	if !ok {
		return false, fmt.Errorf("release %q: %w: circuit breaker open after repeated Redis failures; the slot frees at its lease end", slot.Limit.Name, ErrUnavailable)
	}
	budget, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	released, err := g.limiter.release(budget, slot)
	done(err, ctx)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			g.reloadClusterMap()
		}
		return false, err
	}
	return released, nil
}

// PeekSlots is Limiter.PeekSlots within the Gate's budget and through its
// breaker; when Redis cannot answer, the local count's view is returned,
// marked Degraded.
func (g *Gate) PeekSlots(ctx context.Context, identity string, limit ConcurrencyLimit) (Slot, error) {
	if err := limit.Validate(); err != nil {
		return Slot{}, fmt.Errorf("peek slots: %w: %w", ErrInvalid, err)
	}
	done, ok := g.breaker.allow()
	var err error
	if ok {
		budget, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		var slot Slot
		started := time.Now()
		slot, err = g.limiter.acquire(budget, identity, limit, "")
		done(err, ctx)
		if err == nil {
			slot.RedisLatency = time.Since(started)
			return slot, nil
		}
	} else {
		err = fmt.Errorf("peek slots %q: %w: circuit breaker open after repeated Redis failures", limit.Name, ErrUnavailable)
	}
	local := g.slots.acquire(identity, limit, false)
	local.Cause = err
	return local, nil
}
