package ratelimit

import (
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Decision is the outcome of one limit for one request.
type Decision struct {
	// Limit is the limit this decision is about.
	Limit Limit
	// Allowed reports whether this limit alone admits the request's cost.
	// The request passes only if every limit admits it (Result.Allowed).
	Allowed bool
	// Remaining is how many more units the limit admits right now, after
	// this request's spend if the request passed.
	Remaining int64
	// ResetAfter is how long until the limit would be entirely unused
	// again with no further traffic.
	ResetAfter time.Duration
	// RetryAfter is zero when Allowed. Otherwise it is the shortest wait
	// after which this limit admits the same cost, with no other traffic:
	// exact to the microsecond of the Redis clock.
	RetryAfter time.Duration
	// At is the Redis clock's time when the decision was made.
	At time.Time
	// Degraded is true when the decision was made without Redis, by a local
	// fallback limit.
	Degraded bool
	// Shadow is true for the decision of a shadow check (Check.Shadow): it
	// is reported, Allowed and RetryAfter included, but it did not take
	// part in Result.Allowed.
	Shadow bool
}

// Result is the outcome of one request against all of its limits.
type Result struct {
	// Allowed is true when every enforced limit (every check but the
	// shadow ones) admitted the request and its cost was spent on them, and
	// on each shadow limit that admitted it too; when false, nothing was
	// spent.
	Allowed bool
	// Decisions holds one Decision per Check, in the order given.
	Decisions []Decision
	// Degraded is true when Redis could not decide and a local fallback
	// limit did (Gate, fail-open routes only).
	Degraded bool
	// RedisLatency is how long this decision's Redis round trips took, as
	// Gate measured them, whether Redis answered or not: a Degraded result
	// and the Result Gate.Decide returns with ErrUnavailable carry the time
	// the failed attempt took (a refused dial, an error reply, up to the
	// whole timeout). Zero only when Redis was not asked (deny cache, open
	// circuit breaker) or when the Limiter was called directly.
	RedisLatency time.Duration
	// Cause is why Redis could not decide when Degraded: the error Gate
	// fell back on, wrapping ErrUnavailable (a refused or reset
	// connection, a timeout, an AUTH failure, the circuit breaker being
	// open). Nil otherwise. Its text is the Redis client's and the
	// Limiter's: it names no caller and holds no credential.
	Cause error
	// Control is the live control that changed this decision (a block, an
	// exemption, a scale), read by the decision's own script when the
	// Limiter reads controls (Options.Controls). Its Kind is controls.None
	// when no control applied.
	//
	// Under a block, every decision of the identity is denied with
	// Remaining 0 and RetryAfter and ResetAfter the block's end minus now,
	// and nothing is spent. Under an exemption, the request is Allowed and
	// nothing is spent; each decision is Allowed with no RetryAfter and
	// the identity's honest Remaining and ResetAfter. Under a scale, each
	// decision's Limit has the scaled count it was decided with. A request
	// checking several identities applies each identity's control to its
	// own checks (a block of any denies the request) and reports here a
	// block if any applied (the one ending last), else a scale (the
	// smallest factor), else an exemption; Malformed is set when any
	// identity's record could not be read (it was ignored).
	Control controls.Applied
}

// RetryAfter is how long a denied request should wait: the longest
// RetryAfter of the enforced limits that denied it, after which all of them
// admit it (each limit's state only improves with time). Shadow decisions
// are left out: they deny nothing. Zero when allowed.
func (r Result) RetryAfter() time.Duration {
	var longest time.Duration
	for _, d := range r.Decisions {
		if !d.Allowed && !d.Shadow && d.RetryAfter > longest {
			longest = d.RetryAfter
		}
	}
	return longest
}
