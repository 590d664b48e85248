package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"
)

// Bounds and defaults of a ConcurrencyLimit, as it documents them.
const (
	maxConcurrency          = MaxCount
	minLease                = time.Millisecond
	maxLease                = 24 * time.Hour
	defaultConcurrencyRetry = time.Second
)

// ConcurrencyLimit bounds how many requests of one identity may be in
// flight at once: at most Max slots are held at any instant, each from its
// Acquire until its Release or the end of its Lease, whichever comes first.
//
// A rate limit counts arrivals; this counts requests that have started and
// not yet ended, which is what slow requests use up. The lease is what
// frees the slot of a holder that never releases it (it crashed, timed out,
// or lost its connection to Redis): it must be longer than any request is
// allowed to run.
type ConcurrencyLimit struct {
	// Name is the policy name; it is part of the Redis key. Two limits of
	// the same name and identity share their slots, whatever their Max:
	// lowering Max counts the slots already held against the new Max.
	Name string
	// Max is how many slots may be held at once: 1 to 1,000,000.
	Max int64
	// Lease is how long a slot is held when it is not released: whole
	// milliseconds from 1ms to 24h.
	Lease time.Duration
	// Retry is the wait a denial suggests (Slot.RetryAfter) when the
	// earliest lease end is further away; 1s when zero. It may not be
	// negative. See Slot.RetryAfter for why it is not the lease end.
	Retry time.Duration
}

// String renders the limit as "<max> in flight, lease <lease>".
func (c ConcurrencyLimit) String() string {
	return strconv.FormatInt(c.Max, 10) + " in flight, lease " + formatWindow(c.Lease)
}

// Validate reports whether the limit can be enforced.
func (c ConcurrencyLimit) Validate() error {
	if c.Max < 1 || c.Max > maxConcurrency {
		return fmt.Errorf("concurrency limit %q: max %d out of range 1..%d", c.Name, c.Max, maxConcurrency)
	}
	if c.Lease < minLease || c.Lease > maxLease || c.Lease%time.Millisecond != 0 {
		return fmt.Errorf("concurrency limit %q: lease %s must be whole milliseconds between %s and %s", c.Name, c.Lease, minLease, maxLease)
	}
	if c.Retry < 0 {
		return fmt.Errorf("concurrency limit %q: retry %s is negative", c.Name, c.Retry)
	}
	return nil
}

// retry is the limit's retry hint, the default resolved.
func (c ConcurrencyLimit) retry() time.Duration {
	if c.Retry > 0 {
		return c.Retry
	}
	return defaultConcurrencyRetry
}

// Slot is the outcome of acquiring a slot of a ConcurrencyLimit: a slot
// held until Release or its LeaseEnd, or a denial. Pass it back to Release
// (of the Limiter or Gate that acquired it) when the request ends; a Slot
// that was not Acquired may be passed too, and nothing is done.
type Slot struct {
	// Limit is the limit the slot is of.
	Limit ConcurrencyLimit
	// Acquired reports whether the slot is held. For PeekSlots: whether an
	// acquire would have been.
	Acquired bool
	// Held is how many of the identity's slots are held after the call,
	// this one included when Acquired (for PeekSlots, without the one an
	// acquire would add). Slots whose lease has ended are not counted.
	Held int64
	// LeaseEnd is when an Acquired slot is free again if not released, on
	// the Redis clock (the process's clock when Degraded). Zero otherwise.
	LeaseEnd time.Time
	// EarliestEnd and LatestEnd are the soonest and the latest lease ends
	// of the identity's held slots, this one included; zero when none is
	// held. With no Release and no other acquire, a slot is free again at
	// EarliestEnd at the latest.
	EarliestEnd, LatestEnd time.Time
	// RetryAfter is zero when Acquired. Otherwise it is the shorter of
	// the limit's Retry (1s by default) and the time until EarliestEnd.
	//
	// It is a hint, not a promise as a rate limit's is: a slot is freed by
	// a Release, which nothing can foresee, and EarliestEnd is only when a
	// holder that never releases stops counting. Leases are set to the
	// longest a request may run (a Lambda function's timeout, up to 15
	// minutes), while most requests end within milliseconds: answering the
	// earliest lease end would have a well-behaved client wait minutes for
	// a slot freed in a moment, and turn a burst over the limit into a
	// lockout. One second is the shortest wait Retry-After can express.
	RetryAfter time.Duration
	// At is the Redis clock's time when the call was decided (the
	// process's clock when Degraded).
	At time.Time
	// Degraded is true when Redis could not decide and a Gate's local
	// per-process count did (FailOpen only). Such a slot is released
	// locally.
	Degraded bool
	// RedisLatency is how long the Redis round trip took, as a Gate
	// measured it, whether Redis answered or not; zero when Redis was not
	// asked or the Limiter was called directly.
	RedisLatency time.Duration
	// Cause is why Redis could not decide when Degraded; nil otherwise.
	Cause error

	key   string // the slot set's Redis key; empty when not Acquired
	token string // the slot's member in it
}

// concurrencySuffix is the end of a concurrency limit's key, after the
// identity's hash tag: "cc" and the name. Max and the lease are left out:
// the slots held are the same whatever the limit says now.
func concurrencySuffix(c ConcurrencyLimit) string {
	return ":cc:" + keySafeName(c.Name)
}

// concurrencyKey is the Redis key of an identity's slots of c, under the
// identity's hash tag, as every key of the identity.
func (l *Limiter) concurrencyKey(identity string, c ConcurrencyLimit) string {
	return l.keys.keyForIdentity(identity, concurrencySuffix(c))
}

// newSlotToken returns a random token, 128 bits in unpadded base64url:
// unique per acquire, so that a release frees its own slot and no other.
func newSlotToken() string {
	var b [16]byte
	// crypto/rand.Read never returns an error (it aborts the program when
	// the system's generator fails).
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Acquire takes one of identity's slots of limit, if fewer than limit.Max
// are held: with one script call that first frees the slots whose lease
// has ended, then either adds a slot held until now + limit.Lease on the
// Redis clock, or reports the lease ends of the slots held. Concurrent
// acquires of one identity, from any number of processes, never hold more
// than Max slots at once (the script runs atomically on the identity's
// node).
//
// Redis's own guarantees bound this one: a restart without persistence, or
// a failover to a replica that had not yet received the latest writes,
// forgets slots, and up to Max more may be acquired while the forgotten
// ones' requests still run, for at most one lease.
//
// Errors wrap ErrInvalid (the limit is out of range) or ErrUnavailable.
func (l *Limiter) Acquire(ctx context.Context, identity string, limit ConcurrencyLimit) (Slot, error) {
	if err := limit.Validate(); err != nil {
		return Slot{}, fmt.Errorf("acquire: %w: %w", ErrInvalid, err)
	}
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	return l.acquire(ctx, identity, limit, newSlotToken())
}

// PeekSlots reports identity's slots of limit without taking one or
// writing anything: how many are held, their lease ends, and whether an
// Acquire would succeed now. For status pages and operators.
func (l *Limiter) PeekSlots(ctx context.Context, identity string, limit ConcurrencyLimit) (Slot, error) {
	if err := limit.Validate(); err != nil {
		return Slot{}, fmt.Errorf("peek slots: %w: %w", ErrInvalid, err)
	}
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	return l.acquire(ctx, identity, limit, "")
}

// acquire runs the acquire script within ctx; an empty token peeks.
func (l *Limiter) acquire(ctx context.Context, identity string, limit ConcurrencyLimit, token string) (Slot, error) {
	key := l.concurrencyKey(identity, limit)
	cmd := make([]any, 0, 8)
	cmd = append(cmd, nil, nil, 1, key,
		strconv.FormatInt(limit.Max, 10), strconv.FormatInt(limit.Lease.Microseconds(), 10), token)
	if l.now != nil {
		cmd = append(cmd, strconv.FormatInt(l.now().UnixMicro(), 10))
	}
	vals, err := l.scripts.acquire.run(ctx, l.client, cmd)
	if err != nil {
		return Slot{}, fmt.Errorf("acquire %q: %w: %w", limit.Name, ErrUnavailable, err)
	}
	slot, err := slotFromReply(vals, limit)
	if err != nil {
		return Slot{}, fmt.Errorf("acquire %q: %w: %w", limit.Name, ErrUnavailable, err)
	}
	if slot.Acquired && token != "" {
		slot.key, slot.token = key, token
		slot.LeaseEnd = slot.At.Add(limit.Lease)
	}
	return slot, nil
}

// slotFromReply reads the acquire script's reply.
func slotFromReply(vals []any, limit ConcurrencyLimit) (Slot, error) {
	if len(vals) != 5 {
		return Slot{}, fmt.Errorf("script reply has %d values, want 5", len(vals))
	}
	var n [5]int64
	for i, v := range vals {
		x, ok := v.(int64)
		if !ok {
			return Slot{}, fmt.Errorf("script reply value %d is %T, want an integer", i, v)
		}
		n[i] = x
	}
	s := Slot{Limit: limit, Acquired: n[0] == 1, Held: n[2], At: time.UnixMicro(n[1])}
	if n[3] > 0 {
		s.EarliestEnd = time.UnixMicro(n[3])
		s.LatestEnd = time.UnixMicro(n[4])
	}
	if !s.Acquired {
		s.RetryAfter = denialRetry(limit, s.At, s.EarliestEnd)
	}
	return s, nil
}

// denialRetry is a denial's RetryAfter (see Slot.RetryAfter): the
// limit's retry hint, or the time until the earliest lease end when that
// is sooner, at least 1µs.
func denialRetry(limit ConcurrencyLimit, at, earliestEnd time.Time) time.Duration {
	wait := limit.retry()
	if !earliestEnd.IsZero() {
		wait = min(wait, earliestEnd.Sub(at))
	}
	return max(wait, time.Microsecond)
}

// Release gives back a slot taken by Acquire, with one script call that
// removes the slot's own token and nothing else. It reports whether the
// slot was still there: false when its lease had ended and an acquire had
// cleared it, or Redis forgot it (a restart, a failover); releasing it
// then is a no-op, and never frees another holder's slot. A Slot that was
// not Acquired, or was released already, is released again as a no-op
// too.
//
// Release is best sent with a context of its own, not the request's, which
// may have ended: a slot whose Release fails stays held until its lease
// ends. Errors wrap ErrUnavailable.
func (l *Limiter) Release(ctx context.Context, slot Slot) (bool, error) {
	if slot.token == "" || slot.Degraded {
		return false, nil
	}
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	return l.release(ctx, slot)
}

// release runs the release script within ctx.
func (l *Limiter) release(ctx context.Context, slot Slot) (bool, error) {
	vals, err := l.scripts.release.run(ctx, l.client, []any{nil, nil, 1, slot.key, slot.token})
	if err != nil {
		return false, fmt.Errorf("release %q: %w: %w", slot.Limit.Name, ErrUnavailable, err)
	}
	if len(vals) != 1 {
		return false, fmt.Errorf("release %q: %w: script reply has %d values, want 1", slot.Limit.Name, ErrUnavailable, len(vals))
	}
	n, ok := vals[0].(int64)
	if !ok {
		return false, fmt.Errorf("release %q: %w: script reply value 0 is %T, want an integer", slot.Limit.Name, ErrUnavailable, vals[0])
	}
	return n == 1, nil
}
