package ratelimit

// What this package's tests read of a Gate's insides: its running totals,
// its breaker's state and its deny cache's size.

// gateStats are running totals of a Gate's decisions since it was built,
// for this package's tests.
type gateStats struct {
	// decisions counts calls of Decide and Peek.
	decisions uint64
	// redisCalls counts decisions that were sent to Redis (one decision may
	// take more than one round trip).
	redisCalls uint64
	// degraded counts decisions made by the local fallback.
	degraded uint64
	// rejected counts fail-closed decisions answered with ErrUnavailable.
	rejected uint64
	// denyCacheHits counts decisions answered from the deny cache.
	denyCacheHits uint64
	// breakerSkips counts decisions that did not call Redis because the
	// circuit breaker was open.
	breakerSkips uint64
	// breakerState is "closed", "half-open", "open" or "disabled".
	breakerState string
}

// stats returns the gate's counters.
func (g *Gate) stats() gateStats {
	return gateStats{
		decisions:     g.counters.decisions.Load(),
		redisCalls:    g.counters.redisCalls.Load(),
		degraded:      g.counters.degraded.Load(),
		rejected:      g.counters.rejected.Load(),
		denyCacheHits: g.counters.denyCacheHits.Load(),
		breakerSkips:  g.counters.breakerSkips.Load(),
		breakerState:  g.breaker.state(),
	}
}

// state is the breaker's state: "closed", "half-open", "open" or
// "disabled".
func (b *redisBreaker) state() string {
	if b.cb == nil {
		return "disabled"
	}
	return b.cb.State().String()
}

// len reports how many denials are remembered.
func (c *denyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
