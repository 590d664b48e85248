// Package holdgate lets a test hold the requests of a local HTTP server it
// runs (a fake AWS endpoint, a JWKS server) until it releases them, to pin
// down what does NOT wait for that server without reading a clock: while a
// request is held, Held stays above zero, so a call that returns while
// Held() > 0 did not wait for the answer.
package holdgate

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// Gate holds requests while it is held. The zero value is not ready; use
// New.
type Gate struct {
	mu      sync.Mutex
	release chan struct{} // nil: answer at once
	entered chan struct{} // one receive per request held
	held    atomic.Int64
}

// New returns an open gate: requests pass at once until Hold is called.
func New() *Gate { return &Gate{entered: make(chan struct{}, 64)} }

// Hold holds every request from now on until release is called; release
// may be called more than once.
func (g *Gate) Hold() (release func()) {
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
func (g *Gate) Entered() { <-g.entered }

// Held is the number of requests being held now.
func (g *Gate) Held() int64 { return g.held.Load() }

// Pass is called by the server's handler first: it holds r while the gate
// is held, and reports false when the client gave up waiting.
func (g *Gate) Pass(r *http.Request) bool {
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
