package ratelimit

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"time"
)

// denyCache remembers Redis's denials so that a caller who keeps knocking
// while denied costs no Redis call.
//
// A denial says: with no other traffic, these limits admit this cost again
// after RetryAfter on the Redis clock, counted from the moment the script
// ran. Other traffic can only push that moment later, never earlier. The
// script ran after the request was sent, so the local moment the request was
// sent plus RetryAfter is never later than the moment Redis would admit the
// request: the cache denies until then and not a microsecond longer,
// whatever the offset between the Redis clock and the local one.
//
// When the Limiter reads live controls, a denial is held at most maxHold
// (controls.Propagation): a block lifted, an exemption set or a scale raised
// changes what Redis answers without any traffic, so a warm instance asks
// Redis again within that bound plus one request. The answer the cache
// gives is still the denial's own, its waits shortened by the time passed.
//
// Entries are keyed by the cost and every check (identity, name, count,
// window, algorithm): a different limit set or a smaller cost is asked of
// Redis. The cache is bounded; when full, expired entries go first, then
// the ones that expire soonest.
type denyCache struct {
	maxEntries int
	maxHold    time.Duration // 0: a denial is held for its whole wait

	mu      sync.Mutex
	entries map[denyKey]denyEntry
}

// denyKey is a SHA-256 of the request's cost and checks: fixed size whatever
// the identities hold, and not choosable by a caller who wants to collide
// with someone else's entry.
type denyKey [sha256.Size]byte

type denyEntry struct {
	sent  time.Time // local time the denied request was sent
	until time.Time // sent + the denial's RetryAfter
	res   Result
}

func newDenyCache(maxEntries int, maxHold time.Duration) *denyCache {
	return &denyCache{maxEntries: max(maxEntries, 1), maxHold: maxHold, entries: make(map[denyKey]denyEntry)}
}

func newDenyKey(cost int64, checks []Check) denyKey {
	h := sha256.New()
	var n [8]byte
	writeInt := func(v int64) {
		binary.BigEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	writeString := func(s string) {
		writeInt(int64(len(s)))
		h.Write([]byte(s))
	}
	writeInt(cost)
	writeInt(int64(len(checks)))
	for _, c := range checks {
		writeString(c.Identity)
		writeString(c.Limit.Name)
		writeInt(c.Limit.Count)
		writeInt(int64(c.Limit.Window))
		writeString(string(c.Limit.Algorithm.orDefault()))
		if c.Shadow {
			writeInt(1)
		} else {
			writeInt(0)
		}
	}
	var k denyKey
	h.Sum(k[:0])
	return k
}

// remember stores a denial Redis made for a request sent at sent.
func (c *denyCache) remember(key denyKey, sent time.Time, res Result) {
	wait := res.RetryAfter()
	if res.Allowed || res.Degraded || wait <= 0 {
		return
	}
	if c.maxHold > 0 {
		wait = min(wait, c.maxHold)
	}
	e := denyEntry{sent: sent, until: sent.Add(wait), res: res}
	e.res.Decisions = slices.Clone(res.Decisions)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.maxEntries {
		c.evict(sent)
	}
	c.entries[key] = e
}

// lookup returns the remembered denial of key as it stands at now, with its
// waits shortened by the time that has passed, or false when there is none
// or it has run out.
func (c *denyCache) lookup(key denyKey, now time.Time) (Result, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	if ok && !now.Before(e.until) {
		delete(c.entries, key)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return Result{}, false
	}
	elapsed := max(now.Sub(e.sent), 0)
	res := Result{Allowed: false, Decisions: make([]Decision, len(e.res.Decisions)), Control: e.res.Control}
	for i, d := range e.res.Decisions {
		if !d.Allowed {
			// Never below a microsecond: the denial still holds until
			// e.until, so every denying limit still has a wait.
			d.RetryAfter = max(d.RetryAfter-elapsed, time.Microsecond)
		}
		d.ResetAfter = max(d.ResetAfter-elapsed, 0)
		if !d.At.IsZero() {
			d.At = d.At.Add(elapsed)
		}
		res.Decisions[i] = d
	}
	// Without maxHold, the longest wait is now exactly what is left until
	// e.until; with it, the entry may end before the wait does.
	return res, true
}

// evict makes room: expired entries first, then those that expire soonest,
// down to three quarters of the bound so that a flood does not evict on
// every insert.
func (c *denyCache) evict(now time.Time) {
	for k, e := range c.entries {
		if !now.Before(e.until) {
			delete(c.entries, k)
		}
	}
	target := c.maxEntries * 3 / 4
	if len(c.entries) <= target {
		return
	}
	type aged struct {
		key   denyKey
		until time.Time
	}
	all := make([]aged, 0, len(c.entries))
	for k, e := range c.entries {
		all = append(all, aged{k, e.until})
	}
	slices.SortFunc(all, func(a, b aged) int { return a.until.Compare(b.until) })
	for _, a := range all[:len(all)-target] {
		delete(c.entries, a.key)
	}
}
