package ratelimit

import (
	"slices"
	"sync"
	"time"
)

// fallbackLimiter is the in-memory limit a fail-open route falls back to
// while Redis cannot decide. It is per process: every Lambda instance keeps
// its own, so each limit is divided by the expected number of warm
// instances. It is a token bucket (burst = the divided count) on the
// process's own clock, bounded in size.
type fallbackLimiter struct {
	divisor    int64
	maxEntries int
	now        func() time.Time
	// hashKey is the Limiter's Options.IdentityHashKey: identities are
	// hashed in memory as they are in Redis keys.
	hashKey []byte

	mu      sync.Mutex
	buckets map[fallbackKey]fallbackBucket
}

// fallbackBucket is the state of one identity's limit.
type fallbackBucket struct {
	// tat is the theoretical arrival time (GCRA): the bucket is full again
	// at tat.
	tat time.Time
	// share is the local burst times the emission interval: how far tat
	// may run ahead of now. For a GCRA limit it is the window.
	share time.Duration
}

// spent is the fraction of its share the bucket has spent at now: 0 when
// full, up to 1 when exhausted. An exhausted bucket (its next request is
// denied) has spent more than (burst-1)/burst of its share.
func (b fallbackBucket) spent(now time.Time) float64 {
	return float64(b.tat.Sub(now)) / float64(b.share)
}

// fallbackKey identifies one identity's limit. The identity is kept as a
// 128-bit hash: a flood of long identities costs the same memory as short
// ones, and no raw identity stays in memory longer than its request.
type fallbackKey struct {
	identity [16]byte
	name     string
	count    int64
	window   time.Duration
}

func newFallbackKey(c Check, hashKey []byte) fallbackKey {
	sum := identityDigest(hashKey, c.Identity)
	k := fallbackKey{name: c.Limit.Name, count: c.Limit.Count, window: c.Limit.Window}
	copy(k.identity[:], sum[:16])
	return k
}

func newFallbackLimiter(divisor int64, maxEntries int, now func() time.Time) *fallbackLimiter {
	return &fallbackLimiter{
		divisor:    max(divisor, 1),
		maxEntries: max(maxEntries, 16),
		now:        now,
		buckets:    make(map[fallbackKey]fallbackBucket),
	}
}

// localLimit is a limit as the fallback enforces it: count divided by the
// number of instances, rounded up, at least 1.
func (f *fallbackLimiter) localLimit(l Limit) Limit {
	l.Count = max((l.Count+f.divisor-1)/f.divisor, 1)
	return l
}

// decide applies the same rules as the scripts: the request is admitted iff
// every enforced check admits it; cost is then spent on every enforced
// check and on each shadow check that admits it on its own, and otherwise
// on none.
func (f *fallbackLimiter) decide(cost int64, spend bool, checks []Check) Result {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if spend && len(f.buckets) >= f.maxEntries {
		f.evict(now)
	}
	res := Result{Allowed: true, Degraded: true, Decisions: make([]Decision, len(checks))}
	next := make([]fallbackBucket, len(checks))
	keys := make([]fallbackKey, len(checks))
	for i, c := range checks {
		local := f.localLimit(c.Limit)
		burst := local.Burst()
		interval := local.Window / time.Duration(local.Count)
		key := newFallbackKey(c, f.hashKey)
		keys[i] = key
		tat := f.buckets[key].tat
		if tat.Before(now) {
			tat = now
		}
		n := min(cost, burst)
		newTAT := tat.Add(time.Duration(n) * interval)
		allowAt := newTAT.Add(-time.Duration(burst) * interval)
		d := Decision{Limit: c.Limit, Allowed: cost <= burst && !allowAt.After(now), At: now, Degraded: true, Shadow: c.Shadow}
		after := tat
		if d.Allowed {
			if spend {
				after = newTAT
			}
		} else {
			d.RetryAfter = max(allowAt.Sub(now), time.Microsecond)
			res.Allowed = res.Allowed && c.Shadow
		}
		d.Remaining = max(int64(burst)-int64((after.Sub(now)+interval-1)/interval), 0)
		d.ResetAfter = after.Sub(now)
		res.Decisions[i] = d
		next[i] = fallbackBucket{tat: newTAT, share: time.Duration(burst) * interval}
	}
	if res.Allowed && spend {
		for i, d := range res.Decisions {
			if d.Allowed {
				f.buckets[keys[i]] = next[i]
			}
		}
	}
	return res
}

// evict makes room: it drops the full buckets (their TAT has passed: they
// hold no state), and, if the fallback is still above three quarters of
// its bound, the least spent buckets first, down to three quarters, so
// that evictions are rare (one per maxEntries/4 new entries at most).
//
// Forgetting a bucket gives its identity a fresh share, so the buckets
// forgotten are those whose state is worth least: the smallest fraction
// of their share spent (ties broken arbitrarily). An exhausted identity
// has spent more than (burst-1)/burst of its share, while each throwaway
// identity of a flood has spent only what it was admitted, one request
// (1/burst) for a request each: a flood of new identities, however many,
// evicts its own entries and keeps the exhausted one, which stays denied
// until its TAT. To push it out, a flood would need three quarters of
// maxEntries identities each at least as spent as it, each admitted its
// whole local share first. With a burst of one (a leaky bucket, or a
// divided count of one) every admitted identity is exhausted; the one
// forgotten first is then the one that refills soonest.
func (f *fallbackLimiter) evict(now time.Time) {
	for k, b := range f.buckets {
		if !b.tat.After(now) {
			delete(f.buckets, k)
		}
	}
	excess := len(f.buckets) - f.maxEntries*3/4
	if excess <= 0 {
		return
	}
	spent := make([]float64, 0, len(f.buckets))
	for _, b := range f.buckets {
		spent = append(spent, b.spent(now))
	}
	slices.Sort(spent)
	cut := spent[excess-1] // fewer than excess buckets are below it
	for k, b := range f.buckets {
		if b.spent(now) < cut {
			delete(f.buckets, k)
			excess--
		}
	}
	for k, b := range f.buckets {
		if excess <= 0 {
			break
		}
		if b.spent(now) == cut {
			delete(f.buckets, k)
			excess--
		}
	}
}
