package identity

import (
	"context"
	"sync"
	"time"
)

// refresher runs the loads of one credential source (the API Gateway key
// listing, the JWKS fetch) in the background, one at a time: requests keep
// being answered from the set already loaded while a load is in flight, and
// never wait for it.
//
// A load runs with its own timeout, detached from whatever request
// triggered it, so that a request ending does not cancel the load it
// started. On Lambda a load runs while invocations do: the environment is
// frozen between them, and a load whose timeout passes during a freeze
// fails, is logged, and is tried again by a later trigger.
type refresher struct {
	load    func(context.Context) error
	timeout time.Duration
	now     func() time.Time

	mu        sync.Mutex
	inFlight  *loadAttempt
	startedAt time.Time
	started   bool
}

// loadAttempt is one run of a refresher's load.
type loadAttempt struct {
	done chan struct{}
	err  error // set before done is closed
}

// trigger starts a load, unless one is in flight (it is returned) or the
// last one started less than minGap ago by the refresher's clock (nil is
// returned). A minGap of zero always gives a load to wait for.
func (r *refresher) trigger(minGap time.Duration) *loadAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight != nil {
		return r.inFlight
	}
	now := r.now()
	if r.started && now.Sub(r.startedAt) < minGap {
		return nil
	}
	a := &loadAttempt{done: make(chan struct{})}
	r.inFlight, r.startedAt, r.started = a, now, true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		defer cancel()
		a.err = r.load(ctx)
		r.mu.Lock()
		r.inFlight = nil
		r.mu.Unlock()
		close(a.done)
	}()
	return a
}

// current returns the load in flight, or nil.
func (r *refresher) current() *loadAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight
}

// wait waits until the attempt ends, and returns its error, or until ctx
// is done, and returns ctx's error (the attempt goes on).
func (a *loadAttempt) wait(ctx context.Context) error {
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
