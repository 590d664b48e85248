package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

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
// The cache shares its Limiter's control watch: one HGETALL of the
// network-controls hash per interval per Limiter serves every cache built
// on it and the Limiter's decisions (which read it for the identity
// controls it mirrors, Options.Controls).
type NetworkControlCache struct {
	watch    *controlWatch
	interval time.Duration
	timeout  time.Duration

	mu      sync.Mutex
	src     *watchState        // the watch's read list was taken from
	list    []controls.Network // src's networks, none ended at its filtering
	nextEnd time.Time          // the earliest end in list: list is filtered again then
}

// NewNetworkControlCache returns a cache of l's network controls, read
// again when older than interval (controls.Propagation when zero or less).
// Each read it makes is bounded by l's Options.Timeout, or 100 ms when
// that is zero. It does not contact Redis: the first Get does.
func NewNetworkControlCache(l *Limiter, interval time.Duration) *NetworkControlCache {
	if interval <= 0 {
		interval = controls.Propagation
	}
	timeout := l.timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	return &NetworkControlCache{watch: &l.watch, interval: interval, timeout: timeout}
}

// Get returns the network controls in force now, strictest first (blocks,
// then exemptions). The slice is shared with other callers and must not be
// modified (appending to it copies it); a fresh Get allocates nothing, so
// that even controls.MaxNetworks controls cost each request no copy.
//
// When the list is older than the interval, the call reads Redis again
// (one HGETALL, within the cache's timeout whatever ctx's deadline, so
// that a caller's short deadline does not leave the process without
// controls); a concurrent Get meanwhile answers the last list without
// waiting, except before the first read has succeeded, when it waits for
// that read (or ctx). A failed read keeps the last good list, which Get
// returns with the error (wrapping ErrUnavailable); the next read is an
// interval later, so an outage costs one timeout per interval, not one per
// request. A read that skipped malformed fields, kept only
// controls.MaxNetworks, or found more identity controls than
// maxWatchedControls (1,000; or the overflow field in force),
// returns its list with an error saying so (wrapping
// controls.ErrMalformed or controls.ErrTooMany). Only the Get that made a
// read returns its error; a read a decision of the Limiter made serves
// the cache too, and its error is not returned.
func (c *NetworkControlCache) Get(ctx context.Context) ([]controls.Network, error) {
	w := c.watch
	for {
		w.mu.Lock()
		now := w.clock()
		last := w.last
		fresh := last != nil && now.Sub(w.readAt) < c.interval && !now.Before(w.readAt)
		if fresh || (w.inflight != nil && last != nil) {
			w.mu.Unlock()
			return c.inForce(last, now), nil
		}
		if wait := w.inflight; wait != nil {
			// No list yet: wait for the first read rather than answer
			// an empty one.
			w.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("network controls: %w: %w", ErrUnavailable, ctx.Err())
			}
		}
		done := make(chan struct{})
		w.inflight, w.readAt = done, now
		w.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		s, err := w.refresh(rctx, now, done)
		cancel()
		return c.inForce(s, w.clock()), err
	}
}

// inForce is s's network controls without those ended at now: the same
// slice until the earliest end passes or the watch reads again, then a new
// one (a slice handed out before is never changed). Empty for no read.
func (c *NetworkControlCache) inForce(s *watchState, now time.Time) []controls.Network {
	if s == nil {
		return []controls.Network{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src != s {
		c.src, c.list, c.nextEnd = s, s.networks, time.Time{}
	}
	if len(c.list) > 0 && (c.nextEnd.IsZero() || !now.Before(c.nextEnd)) {
		kept := make([]controls.Network, 0, len(c.list))
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
	return c.list[:len(c.list):len(c.list)]
}
