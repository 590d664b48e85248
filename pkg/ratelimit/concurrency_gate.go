package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Acquire takes one of identity's slots of limit, if fewer than limit.Max
// are held: with one script call that first frees the slots whose lease
// has ended, then either adds a slot held until now + limit.Lease on the
// Redis clock, or reports the lease ends of the slots held. Concurrent
// acquires of one identity, from any number of processes, never hold more
// than Max slots at once (the script runs atomically on the identity's
// node). Redis's own guarantees bound this one: a restart without
// persistence, or a failover to a replica that had not yet received the
// latest writes, forgets slots, and up to Max more may be acquired while
// the forgotten ones' requests still run, for at most one lease.
//
// The call runs within the Gate's budget (the Limiter's Options.Timeout,
// 100 ms when zero) and through its circuit breaker, as a rate decision
// is, under the failure policy. When Redis cannot decide, a
// FailOpen acquire takes a slot of the Gate's local count instead (each
// limit's Max divided by GateOptions.FallbackInstances, rounded up, at
// least 1; leases on the process's clock) and the Slot is Degraded; a
// FailClosed acquire gets ErrUnavailable, with a Slot holding only its
// RedisLatency. Denials are not cached: a Release may free a slot at any
// moment. Errors wrap ErrInvalid (the limit is out of range) or, under
// FailClosed only, ErrUnavailable.
func (g *Gate) Acquire(ctx context.Context, policy FailurePolicy, identity string, limit ConcurrencyLimit) (Slot, error) {
	if err := limit.validate(); err != nil {
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
// count, any other on Redis, with one script call that removes the slot's
// own token and nothing else, within the Gate's budget and through its
// breaker. It reports whether the slot was still there: false when its
// lease had ended and an acquire had cleared it, or Redis forgot it (a
// restart, a failover); releasing it then is a no-op, and never frees
// another holder's slot. A Slot that was not Acquired, or was released
// already, is released again as a no-op too. When Redis cannot be reached (or the breaker is
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

// PeekSlots reports identity's slots of limit without taking one or
// writing anything: how many are held, their lease ends, and whether an
// Acquire would succeed now, for status pages and operators. It runs
// within the Gate's budget and through its breaker; when Redis cannot answer, the local count's view is returned,
// marked Degraded.
func (g *Gate) PeekSlots(ctx context.Context, identity string, limit ConcurrencyLimit) (Slot, error) {
	if err := limit.validate(); err != nil {
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
