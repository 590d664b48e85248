package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// floodResult is one identity flooding at 100x its limit.
type floodResult struct {
	Requests        int     `json:"requests"`
	Admitted        int     `json:"admitted"`
	CallsPerRequest float64 `json:"redis_calls_per_request"`
	CallsPerDenied  float64 `json:"redis_calls_per_denied_request"`
	Mode            string  `json:"mode"`
}

// runFlood has one identity send 100x its limit over one window and counts
// the client's round trips to Redis. Contenders with a controllable clock
// get the flood evenly spread over the window on the virtual clock
// (100 requests per limit unit); the others get the same number of
// requests as fast as one client sends them, in real time.
// via says how slidegate is called: "limiter" (Limiter.Decide), "gate"
// (Gate.Decide, deny cache on) or "gate-nocache" (deny cache off).
func runFlood(ctx context.Context, b *bench, c *contender, via string) (floodResult, error) {
	lim := b.cfg.floodLimit
	n := int(lim.Count) * 100
	var now time.Time
	var clock func() time.Time
	mode := "real time, back to back"
	if c.Virtual {
		clock = func() time.Time { return now }
		mode = "virtual clock, evenly spread over one window"
	}
	var decide decider
	var err error
	switch via {
	case "gate":
		decide, err = c.buildGate(clock, lim, false)
		mode += ", Gate with deny cache"
	case "gate-nocache":
		decide, err = c.buildGate(clock, lim, true)
		mode += ", Gate without deny cache"
	default:
		decide, err = c.build(clock, lim)
	}
	if err != nil {
		return floodResult{}, err
	}
	if err := b.stats.FlushAll(ctx).Err(); err != nil {
		return floodResult{}, fmt.Errorf("flushall: %w", err)
	}
	base := alignedBase(lim.Window).Add(20 * lim.Window)
	step := lim.Window / time.Duration(n)
	b.hook.reset()
	admitted := 0
	for i := 0; i < n; i++ {
		now = base.Add(time.Duration(i) * step)
		ok, err := decide(ctx, "flooder")
		if err != nil {
			return floodResult{}, fmt.Errorf("%s: flood: %w", c.Name, err)
		}
		if ok {
			admitted++
		}
	}
	trips := float64(b.hook.trips.Load())
	denied := n - admitted
	res := floodResult{Requests: n, Admitted: admitted, CallsPerRequest: trips / float64(n), Mode: mode}
	if denied > 0 {
		// Every admitted request needs its round trip; what is left is
		// what the denials cost.
		res.CallsPerDenied = max(0, trips-float64(admitted)) / float64(denied)
	}
	return res, nil
}

// burstResult is many simultaneous requests from one identity.
type burstResult struct {
	Requests int    `json:"requests"`
	Limit    int64  `json:"limit"`
	Admitted int64  `json:"admitted"`
	Clock    string `json:"clock"`
	// Seconds is how long the burst took to be decided, which matters for
	// the real-time contenders: a token bucket refills meanwhile.
	Seconds float64 `json:"seconds"`
}

// runBurst releases n requests for one identity at once and counts the
// admitted. Virtual-clock contenders see one frozen instant, which is what
// "simultaneous" means; the others run in real time.
func runBurst(ctx context.Context, b *bench, c *contender, n int) (burstResult, error) {
	lim := b.cfg.burstLimit
	var clock func() time.Time
	mode := "real time"
	if c.Virtual {
		at := alignedBase(lim.Window).Add(lim.Window / 2)
		clock = func() time.Time { return at }
		mode = "frozen virtual instant"
	}
	decide, err := c.build(clock, lim)
	if err != nil {
		return burstResult{}, err
	}
	if err := b.stats.FlushAll(ctx).Err(); err != nil {
		return burstResult{}, fmt.Errorf("flushall: %w", err)
	}
	var (
		admitted atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := decide(ctx, "burster")
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			if ok {
				admitted.Add(1)
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)
	if err, _ := firstErr.Load().(error); err != nil {
		return burstResult{}, fmt.Errorf("%s: burst: %w", c.Name, err)
	}
	return burstResult{Requests: n, Limit: lim.Count, Admitted: admitted.Load(), Clock: mode, Seconds: took.Seconds()}, nil
}
