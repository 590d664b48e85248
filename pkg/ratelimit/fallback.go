package ratelimit

import (
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
	buckets map[fallbackKey]time.Time // theoretical arrival time (GCRA)
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
		buckets:    make(map[fallbackKey]time.Time),
	}
}

// localLimit is a limit as the fallback enforces it: count divided by the
// number of instances, rounded up, at least 1.
func (f *fallbackLimiter) localLimit(l Limit) Limit {
	l.Count = max((l.Count+f.divisor-1)/f.divisor, 1)
	return l
}

// decide applies the same all-or-nothing rule as the scripts: cost is spent
// on every limit or on none.
func (f *fallbackLimiter) decide(cost int64, spend bool, checks []Check) Result {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if spend && len(f.buckets) >= f.maxEntries {
		f.evict(now)
	}
	res := Result{Allowed: true, Degraded: true, Decisions: make([]Decision, len(checks))}
	next := make([]time.Time, len(checks))
	keys := make([]fallbackKey, len(checks))
	for i, c := range checks {
		local := f.localLimit(c.Limit)
		burst := local.Burst()
		interval := local.Window / time.Duration(local.Count)
		key := newFallbackKey(c, f.hashKey)
		keys[i] = key
		tat := f.buckets[key]
		if tat.Before(now) {
			tat = now
		}
		n := min(cost, burst)
		newTAT := tat.Add(time.Duration(n) * interval)
		allowAt := newTAT.Add(-time.Duration(burst) * interval)
		d := Decision{Limit: c.Limit, Allowed: cost <= burst && !allowAt.After(now), At: now, Degraded: true}
		after := tat
		if d.Allowed {
			if spend {
				after = newTAT
			}
		} else {
			d.RetryAfter = max(allowAt.Sub(now), time.Microsecond)
			res.Allowed = false
		}
		d.Remaining = max(int64(burst)-int64((after.Sub(now)+interval-1)/interval), 0)
		d.ResetAfter = after.Sub(now)
		res.Decisions[i] = d
		next[i] = newTAT
	}
	if res.Allowed && spend {
		for i := range checks {
			f.buckets[keys[i]] = next[i]
		}
	}
	return res
}

// evict drops full buckets (their TAT has passed: they hold no state), and
// if that is not enough, arbitrary others: under a flood of identities the
// fallback forgets some of them rather than grow without bound.
func (f *fallbackLimiter) evict(now time.Time) {
	for k, tat := range f.buckets {
		if !tat.After(now) {
			delete(f.buckets, k)
		}
	}
	for k := range f.buckets {
		if len(f.buckets) < f.maxEntries*3/4 {
			break
		}
		delete(f.buckets, k)
	}
}
