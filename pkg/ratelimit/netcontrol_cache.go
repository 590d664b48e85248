package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"
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
type NetworkControlCache struct {
	limiter  *Limiter
	interval time.Duration
	timeout  time.Duration
	now      func() time.Time

	mu       sync.Mutex
	list     []NetworkControl // the last good read, strictest first, none ended at its filtering
	nextEnd  time.Time        // the earliest end in list: list is filtered again then
	loaded   bool             // a read has succeeded at least once
	readAt   time.Time        // when the last read (good or not) started
	inflight chan struct{}    // closed when the read in flight ends; nil when none
}

// NewNetworkControlCache returns a cache of l's network controls, read
// again when older than interval (ControlPropagation when zero or less).
// Each read is bounded by l's Options.Timeout, or 100 ms when that is zero.
// It does not contact Redis: the first Get does.
func NewNetworkControlCache(l *Limiter, interval time.Duration) *NetworkControlCache {
	if interval <= 0 {
		interval = ControlPropagation
	}
	timeout := l.timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	now := l.now
	if now == nil {
		now = time.Now
	}
	return &NetworkControlCache{limiter: l, interval: interval, timeout: timeout, now: now}
}

// Get returns the network controls in force now, strictest first (blocks,
// then exemptions). The slice is shared with other callers and must not be
// modified (appending to it copies it); a fresh Get allocates nothing, so
// that even MaxNetworkControls controls cost each request no copy.
//
// When the list is older than the interval, the call reads Redis again
// (one HGETALL, within the cache's timeout whatever ctx's deadline, so
// that a caller's short deadline does not leave the process without
// controls); a concurrent Get meanwhile answers the last list without
// waiting, except before the first read has succeeded, when it waits for
// that read (or ctx). A failed read keeps the last good list, which Get
// returns with the error (wrapping ErrUnavailable); the next read is an
// interval later, so an outage costs one timeout per interval, not one per
// request. A read that skipped malformed fields, or kept only
// MaxNetworkControls, returns its list with an error saying so (wrapping
// ErrMalformedControl or ErrTooManyControls). Only the Get that made a
// read returns its error.
func (c *NetworkControlCache) Get(ctx context.Context) ([]NetworkControl, error) {
	for {
		c.mu.Lock()
		now := c.now()
		fresh := c.loaded && now.Sub(c.readAt) < c.interval && !now.Before(c.readAt)
		if fresh || (c.inflight != nil && c.loaded) {
			list := c.inForceLocked(now)
			c.mu.Unlock()
			return list, nil
		}
		if wait := c.inflight; wait != nil {
			// No list yet: wait for the first read rather than answer
			// an empty one.
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("network controls: %w: %w", ErrUnavailable, ctx.Err())
			}
		}
		done := make(chan struct{})
		c.inflight = done
		c.readAt = now
		c.mu.Unlock()
		return c.refresh(ctx, done)
	}
}

// refresh reads the controls and publishes them, then wakes the waiters.
func (c *NetworkControlCache) refresh(ctx context.Context, done chan struct{}) ([]NetworkControl, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	list, err := c.limiter.readNetworkControls(rctx, c.now())
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight = nil
	close(done)
	if list != nil {
		c.list, c.nextEnd, c.loaded = list, time.Time{}, true
	} else if !c.loaded {
		// A failed first read: the waiters read again rather than wait
		// an interval with no list at all.
		c.readAt = time.Time{}
	}
	return c.inForceLocked(c.now()), err
}

// inForceLocked is the list without the controls ended at now: the same
// slice until the earliest end passes, then a new one (a slice handed out
// before is never changed).
func (c *NetworkControlCache) inForceLocked(now time.Time) []NetworkControl {
	if len(c.list) > 0 && (c.nextEnd.IsZero() || !now.Before(c.nextEnd)) {
		kept := make([]NetworkControl, 0, len(c.list))
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
