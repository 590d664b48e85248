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

// validate reports whether the limit can be enforced.
func (c ConcurrencyLimit) validate() error {
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
