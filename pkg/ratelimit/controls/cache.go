package controls

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/ctlstore"
)

// defaultTimeout bounds a cache's read when its Limiter has no
// Options.Timeout.
const defaultTimeout = 100 * time.Millisecond

// NetworkControlCache keeps one process's copy of the network controls,
// read from Redis at most once per interval, on the request path: Lambda
// freezes a process between invocations, so a background timer would
// neither run while frozen nor be needed when thawed. Build one per
// process and share it; it is safe for concurrent use.
//
// A change of network control is seen by a Get at most interval (plus
// one read's time) after it was written: the first Get past the interval
// reads again. A control's end is applied at every Get, on this process's
// clock (Options.Now when set), so an ended control stops applying
// without waiting for a read; clocks skewed against Redis's move that end
// by the skew.
//
// The cache shares its Store's Limiter's control watch: one HGETALL of
// the network-controls hash per interval per Limiter serves every cache
// built on it and the Limiter's decisions (which read it for the identity
// controls it mirrors, Options.Controls).
type NetworkControlCache struct {
	watch    *ctlstore.Watch
	interval time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	src     *ctlstore.State // the watch's read list was taken from
	list    []Network       // src's networks, none ended at its filtering
	nextEnd time.Time       // the earliest end in list: list is filtered again then
}

// NewNetworkControlCache returns a cache of s's network controls, read
// again when older than interval (Propagation when zero or less). Each
// read it makes is bounded by the Limiter's Options.Timeout, or 100 ms
// when that is zero. It does not contact Redis: the first Get does.
func NewNetworkControlCache(s *Store, interval time.Duration) *NetworkControlCache {
	if interval <= 0 {
		interval = Propagation
	}
	cfg := s.cfg()
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	return &NetworkControlCache{watch: cfg.Watch, interval: interval, timeout: timeout}
}

// Get returns the network controls in force now, strictest first (blocks,
// then exemptions). The slice is shared with other callers and must not be
// modified (appending to it copies it); a fresh Get allocates nothing, so
// that even MaxNetworks controls cost each request no copy.
//
// When the list is older than the interval, the call reads Redis again
// (one HGETALL, within the cache's timeout whatever ctx's deadline, so
// that a caller's short deadline does not leave the process without
// controls); a concurrent Get meanwhile answers the last list without
// waiting, except before the first read has succeeded, when it waits for
// that read (or ctx). A failed read keeps the last good list, which Get
// returns with the error (wrapping ratelimit.ErrUnavailable); the next
// read is an interval later, so an outage costs one timeout per interval,
// not one per request. A read that skipped malformed fields, kept only
// MaxNetworks, or found more identity controls than the 1,000 a process
// watches (or the overflow field in force), returns its list with an
// error saying so (wrapping ErrMalformed or ErrTooMany). Only the Get
// that made a read returns its error; a read a decision of the Limiter
// made serves the cache too, and its error is not returned.
func (c *NetworkControlCache) Get(ctx context.Context) ([]Network, error) {
	s, read, err := c.watch.ForCache(ctx, c.interval, c.timeout)
	if s == nil && err != nil {
		return nil, err
	}
	list, problems := c.inForce(s, c.watch.Clock())
	if !read {
		return list, nil
	}
	if err != nil {
		return list, err
	}
	return list, problems
}

// inForce is s's network controls without those ended at now: the same
// slice until the earliest end passes or the watch reads again, then a new
// one (a slice handed out before is never changed). Empty for no read.
// problems is what s's read says of the controls (networksOf, and the
// identity controls past the watched).
func (c *NetworkControlCache) inForce(s *ctlstore.State, now time.Time) (list []Network, problems error) {
	if s == nil {
		return []Network{}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src != s {
		var nets []Network
		nets, problems = keepNetworks(networksOf(s))
		c.src, c.list, c.nextEnd = s, nets, time.Time{}
		problems = errors.Join(problems, s.IdentityProblem())
	}
	if len(c.list) > 0 && (c.nextEnd.IsZero() || !now.Before(c.nextEnd)) {
		kept := make([]Network, 0, len(c.list))
		var next time.Time
		for _, nc := range c.list {
			if !nc.Control.Until.After(now) {
				continue
			}
			kept = append(kept, nc)
			if next.IsZero() || nc.Control.Until.Before(next) {
				next = nc.Control.Until
			}
		}
		c.list, c.nextEnd = kept, next
	}
	return c.list[:len(c.list):len(c.list)], problems
}
