package identity_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// clock is a test clock, safe for the background loads that read it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// holdGate lets a test hold a server's requests until it releases them,
// to pin down what does not wait for that server: while a request is held,
// Held() stays above zero, so a call that returns with Held() > 0 did not
// wait for it to be answered.
type holdGate struct {
	mu      sync.Mutex
	release chan struct{} // nil: answer at once
	entered chan struct{} // one receive per request held
	held    atomic.Int64
}

func newHoldGate() *holdGate { return &holdGate{entered: make(chan struct{}, 64)} }

// Hold holds every request from now on until release is called.
func (g *holdGate) Hold() (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.release = ch
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			if g.release == ch {
				g.release = nil
			}
			g.mu.Unlock()
			close(ch)
		})
	}
}

// Entered waits until a request is being held.
func (g *holdGate) Entered() { <-g.entered }

// Held is the number of requests being held now.
func (g *holdGate) Held() int64 { return g.held.Load() }

// pass holds r while the gate is held; false when the client gave up.
func (g *holdGate) pass(r *http.Request) bool {
	g.mu.Lock()
	ch := g.release
	g.mu.Unlock()
	if ch == nil {
		return true
	}
	g.held.Add(1)
	defer g.held.Add(-1)
	g.entered <- struct{}{}
	select {
	case <-ch:
		return true
	case <-r.Context().Done():
		return false
	}
}
