package instance

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Leases of the in-flight slots, when RATE_LIMIT_CONCURRENCY_LEASE is not
// set.
const (
	// concurrencyLeaseMargin is added to the time left until the
	// invocation's deadline: a slot must outlive the request it counts,
	// Redis's clock may run a little ahead of the function's, and the
	// release itself takes a round trip.
	concurrencyLeaseMargin = 5 * time.Second
	// noDeadlineLease is the lease of a request whose context has no
	// deadline (a local server): Lambda's longest timeout, 15 minutes.
	noDeadlineLease = 15 * time.Minute
)

// Acquire takes, before the request's handler runs, one slot of every
// in-flight limit that applies to it (RATE_LIMIT_CONCURRENCY on its stage,
// policy.Rules.InFlight), for the caller's identity: the same
// identity its rate limits count. The slots are held until the Admission's
// Release, which the handler's caller calls when the handler returns, or
// until their lease: RATE_LIMIT_CONCURRENCY_LEASE, or the time left until
// the invocation's deadline (the Lambda context's) plus a margin, so that
// an instance killed mid-request holds its slot no longer than the
// function could have run.
//
// When a limit is full the Admission is Denied, with that limit's Slot,
// and no slot is held (those taken for the request's other limits are
// given back). Redis down or slow follows the route's failure policy, as a
// rate decision does: a fail-open route counts in flight locally, per
// instance (ratelimit.Gate.Acquire), a fail-closed one gets an error
// wrapping ratelimit.ErrUnavailable. With no in-flight limit on the stage,
// Acquire resolves nothing and calls nothing; after Decide on the same
// Resolution, it counts the caller Decide resolved.
func (r *Resolution) Acquire(ctx context.Context) (httplimit.Admission, error) {
	if r.limits.Concurrency.Empty() {
		return httplimit.Admission{}, nil
	}
	r.resolveCaller(ctx)
	rt := r.rt
	limits := r.rules.InFlight
	if len(limits) == 0 {
		return httplimit.Admission{}, nil
	}
	onFailure := failurePolicy(r.rules.FailClosed)
	lease := rt.concurrencyLease(ctx)
	gate := r.gate.gate
	ctx = tracing.WithTier(ctx, r.who.Caller.Tier)
	// Acquisitions share the Redis budget a failed read of the network
	// controls spent (liveNetworks); releases keep their own.
	acquireCtx, cancel := r.redisBudget(ctx)
	defer cancel()
	held := make([]ratelimit.Slot, 0, len(limits))
	for _, limit := range limits {
		limit.Lease = lease
		slot, err := gate.Acquire(acquireCtx, onFailure, r.who.Caller.Identity, limit)
		if err != nil || !slot.Acquired {
			rt.releaseSlots(ctx, gate, held)
		}
		if err != nil {
			return httplimit.Admission{}, fmt.Errorf("acquire in-flight slot %s for %s on %s: %w", limit.Name, r.who.Caller.Tier, apigw.RouteName(r.req), err)
		}
		if !slot.Acquired {
			rt.observer.ConcurrencyDenied(ctx, r.req, r.who.Caller.Tier, r.gate.hashOf(r.who.Caller.Identity), slot)
			return httplimit.Admission{Denied: true, Slot: slot}, nil
		}
		held = append(held, slot)
	}
	rt.observer.InFlight(r.who.Caller.Tier, held)
	return httplimit.Admission{Release: func(ctx context.Context) { rt.releaseSlots(ctx, gate, held) }}, nil
}

// concurrencyLease is the lease of a request's slots (see Acquire), in
// whole milliseconds.
func (rt *Runtime) concurrencyLease(ctx context.Context) time.Duration {
	if rt.cfg.ConcurrencyLease > 0 {
		return rt.cfg.ConcurrencyLease
	}
	lease := noDeadlineLease
	if deadline, ok := ctx.Deadline(); ok {
		lease = max(time.Until(deadline), 0)
	}
	return (lease + concurrencyLeaseMargin).Truncate(time.Millisecond)
}

// releaseSlots gives back held slots, each within the gate's budget. A
// release that fails is logged: its slot stays held until its lease ends.
func (rt *Runtime) releaseSlots(ctx context.Context, gate *ratelimit.Gate, held []ratelimit.Slot) {
	ctx = context.WithoutCancel(ctx)
	for _, s := range held {
		if _, err := gate.Release(ctx, s); err != nil {
			rt.logger.LogAttrs(ctx, slog.LevelWarn, "in-flight slot not released; it is held until its lease ends",
				slog.String("limit", s.Limit.Name), slog.Time("lease_end", s.LeaseEnd), slog.String("error", err.Error()))
		}
	}
}
