package ratelimit

import (
	"sync"
	"time"
)

// slotFallback is the local count of slots a fail-open Gate falls back to
// while Redis cannot decide an Acquire: per process, so each limit's Max is
// divided by the expected number of instances (rounded up, at least 1),
// with leases on the process's clock. A slot it gives is released by it,
// never on Redis.
//
// It holds only slots in flight in this process, so its size is bounded by
// the process's own concurrency; maxEntries bounds it anyway, in identity
// and limit pairs: past it, after the ended leases are cleared, an
// identity not yet counted is denied (the strict answer), never admitted
// uncounted.
type slotFallback struct {
	divisor    int64
	maxEntries int
	now        func() time.Time
	hashKey    []byte

	mu    sync.Mutex
	slots map[slotFallbackKey]map[string]time.Time // token -> lease end
}

// slotFallbackKey is one identity's concurrency limit, the identity kept
// as a 128-bit hash as the rate fallback does.
type slotFallbackKey struct {
	identity [16]byte
	name     string
}

func newSlotFallback(divisor int64, maxEntries int, now func() time.Time) *slotFallback {
	return &slotFallback{
		divisor:    max(divisor, 1),
		maxEntries: max(maxEntries, 16),
		now:        now,
		slots:      make(map[slotFallbackKey]map[string]time.Time),
	}
}

// localMax is a limit's Max as the fallback enforces it.
func (f *slotFallback) localMax(c ConcurrencyLimit) int64 {
	return max((c.Max+f.divisor-1)/f.divisor, 1)
}

func (f *slotFallback) key(identity string, c ConcurrencyLimit) slotFallbackKey {
	sum := identityDigest(f.hashKey, identity)
	k := slotFallbackKey{name: c.Name}
	copy(k.identity[:], sum[:16])
	return k
}

// acquire takes a local slot, or peeks when spend is false, with the same
// rules as the acquire script.
func (f *slotFallback) acquire(identity string, c ConcurrencyLimit, spend bool) Slot {
	now := f.now()
	k := f.key(identity, c)
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.slots[k]
	for token, end := range held {
		if !end.After(now) {
			delete(held, token)
		}
	}
	if held != nil && len(held) == 0 {
		delete(f.slots, k)
		held = nil
	}
	s := Slot{Limit: c, At: now, Degraded: true, Held: int64(len(held))}
	room := s.Held < f.localMax(c)
	if room && held == nil && spend && len(f.slots) >= f.maxEntries {
		f.clearEnded(now)
		room = len(f.slots) < f.maxEntries
	}
	if room && spend {
		if held == nil {
			held = make(map[string]time.Time, 1)
			f.slots[k] = held
		}
		token := newSlotToken()
		held[token] = now.Add(c.Lease)
		s.Held++
		s.key, s.token = string(k.identity[:]), token
		s.LeaseEnd = now.Add(c.Lease)
	}
	s.Acquired = room
	for _, end := range held {
		if s.EarliestEnd.IsZero() || end.Before(s.EarliestEnd) {
			s.EarliestEnd = end
		}
		if end.After(s.LatestEnd) {
			s.LatestEnd = end
		}
	}
	if !s.Acquired {
		s.RetryAfter = denialRetry(c, now, s.EarliestEnd)
	}
	return s
}

// clearEnded drops every slot whose lease has ended, and the identities
// left with none.
func (f *slotFallback) clearEnded(now time.Time) {
	for k, held := range f.slots {
		for token, end := range held {
			if !end.After(now) {
				delete(held, token)
			}
		}
		if len(held) == 0 {
			delete(f.slots, k)
		}
	}
}

// release gives back a local slot (its key is the identity's hash); it
// reports whether the slot was still held.
func (f *slotFallback) release(slot Slot) bool {
	k := slotFallbackKey{name: slot.Limit.Name}
	copy(k.identity[:], slot.key)
	f.mu.Lock()
	defer f.mu.Unlock()
	held := f.slots[k]
	end, ok := held[slot.token]
	if !ok {
		return false
	}
	delete(held, slot.token)
	if len(held) == 0 {
		delete(f.slots, k)
	}
	return end.After(f.now())
}
