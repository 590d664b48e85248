package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/edge"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Decide answers one request: who the caller is, which limits apply (the
// caller's plan's or tier's limits on the request's stage, and every
// matching route limit, counted for the same identity, with the route's
// cost and each limit's shadow flag), then one decision that spends on all
// of them or none. A request from a blocked or an unlimited network
// (RATE_LIMIT_NETWORKS, or a live network control: policy.NetworkVerdict)
// is decided by that alone, without a Redis call for the decision.
//
// Live controls apply: the caller's identity control inside the decision's
// own script call, from the next request after it was set (a block denies
// without spending, until its end; an exemption admits without spending; a
// scale decides against the scaled limits, which the Result reports); the
// network controls as this process last read them, at most
// controls.Propagation old (liveNetworks).
//
// The Outcome's Kind says what happened, and every answer derives from it
// (see edge.Kind). Unauthorized requests are not errors: they were counted
// against their source IP's anonymous limit (Kind Unauthorized or
// UnauthorizedOverLimit). The error is non-nil only when the request
// cannot be decided, and then says why, for the log: a fail-closed route
// while Redis is unavailable (Kind Unavailable, the error wrapping
// ratelimit.ErrUnavailable; the Outcome still names the caller and
// FailClosed, and its Result holds the RedisLatency of the failed attempt,
// which the metrics record publishes) or limits that can never be decided
// (Kind Undecidable, ratelimit.ErrInvalid).
//
// req must be normalised as the edge package builds it (upper-case method,
// lower-case header names).
func (rt *Runtime) Decide(ctx context.Context, req edge.Request) (edge.Outcome, error) {
	return rt.decideResolved(ctx, rt.resolve(ctx, req))
}

// Quota answers GET /v1/quota: it spends one call from the caller's
// quota-route limit (RATE_LIMIT_QUOTA, rateLimitQuota, for the caller's
// identity) and, when that admits it, peeks at every limit of the caller's
// plan or tier and its route limits, which it never spends (the Outcome's
// Kind and Result are then the peek's). When the quota limit denies, the Outcome has QuotaDenied
// set and its Result is that denial: nothing is peeked,
// and a caller flooding the quota costs one Redis call per denied request
// at most (none while the deny cache holds the denial), never a read of its
// other limits.
//
// The two steps are two calls, not one script: they need no atomicity (a
// peek writes nothing, so there is no all-or-nothing to keep between
// them), the spend comes first so that a denied flood stops there, and the
// quota limit keeps a key of its own, never touching the tier's counter.
//
// The quota limit is fail-open, like the route: when Redis cannot decide
// it, the local fallback does, and the peek shows the fallback's view,
// marked degraded. Only a caller with a verified identity (or none at all)
// peeks: an unknown API key or a bearer token that does not verify is
// decided exactly as Decide would (counted against the source IP's
// anonymous limit and every route limit of the request, logged, and
// subject to the route's failure policy), or the quota would be a free,
// unlogged oracle for guessing keys and tokens.
func (rt *Runtime) Quota(ctx context.Context, req edge.Request) (edge.Outcome, error) {
	r := rt.resolve(ctx, req)
	if r.who.Unauthorized {
		return rt.decideResolved(ctx, r)
	}
	out := r.outcome()
	if decidedByNetwork(&out, r.rules.Caller, false) {
		// No limit applies to such a caller, or none it could ever use:
		// decided without a Redis call, as its other requests are.
		rt.observe(ctx, r, out, nil)
		return out, nil
	}
	ctx = tracing.WithTier(ctx, out.Caller.Tier)
	ctx, cancel := r.redisBudget(ctx)
	defer cancel()
	quota := ratelimit.Check{Identity: out.Caller.Identity, Limit: r.limits.Quota}
	spent, err := r.gate.gate.Decide(ctx, 1, ratelimit.FailOpen, quota)
	if err != nil {
		err = fmt.Errorf("quota %s for %s: %w", edge.RouteName(r.req), out.Caller.Tier, err)
	}
	out.Result, out.Kind = spent, httplimit.KindOf(spent, false, err)
	out.QuotaDenied = err == nil && !spent.Allowed
	rt.observe(ctx, r, out, err)
	if err != nil || out.QuotaDenied {
		return out, err
	}
	rt.noteUnknownPlan(ctx, r)
	out.Plan = r.rules.Plan
	out.Result, err = r.gate.gate.Peek(ctx, 1, r.rules.Checks(out.Caller.Identity)...)
	if err != nil {
		err = fmt.Errorf("peek %s for %s: %w", edge.RouteName(r.req), out.Caller.Tier, err)
	}
	out.Kind = httplimit.KindOf(out.Result, false, err)
	return out, err
}

// resolvedRequest is a request with its caller, its rules on its stage
// (internal/policy) and the gate of the current identity hash key.
type resolvedRequest struct {
	req    edge.Request
	limits *config.Limits
	rules  policy.Rules
	gate   *hashedGate
	who    identity.Resolution
	// start is when the decision began.
	start time.Time
	// redisDeadline, when set, is when the decision's Redis calls must end:
	// a read of the network controls that failed spent the Redis budget
	// (liveNetworks), which the decision then shares.
	redisDeadline time.Time
}

// redisBudget is ctx bounded by the request's redisDeadline, when it has
// one.
func (r resolvedRequest) redisBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.redisDeadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, r.redisDeadline)
}

// resolve resolves req's caller and its rules (policy.Stage.Resolve: the
// request in every reading, the strictest taken). An anonymous caller
// whose source address does not parse is logged (within its budget).
// Within a RequestScope, the scope's request is resolved once: a second
// resolve of it returns the first's caller and rules.
func (rt *Runtime) resolve(ctx context.Context, req edge.Request) resolvedRequest {
	start := time.Now()
	scope, _ := ctx.Value(requestScopeKey{}).(*requestScope)
	if scope != nil && scope.kept && sameRequest(scope.resolved.req, req) {
		r := scope.resolved
		// The network controls are not read again: no read spent this
		// call's Redis budget.
		r.req, r.start, r.redisDeadline = req, start, time.Time{}
		return r
	}
	limits := rt.stages.For(req.StageVariables)
	rt.awaitIdentity(ctx, req.Headers)
	who := rt.resolver.ResolveForAPI(ctx, req.APIID, req.Stage, req.Headers, req.SourceIP, limits.IPv6Prefix)
	if who.InvalidSource {
		rt.observer.InvalidSource(ctx, req.SourceIP)
	}
	stage := policy.StageOf(rt.cfg, limits)
	gate := rt.currentGate(ctx)
	var deadline time.Time
	stage.NetworkControls, deadline = rt.liveNetworks(ctx, gate)
	rules := stage.Resolve(policy.Read(req), who.Caller)
	r := resolvedRequest{req: req, limits: limits, rules: rules, gate: gate, who: who, start: start, redisDeadline: deadline}
	if scope != nil && !scope.kept {
		scope.resolved, scope.kept = r, true
	}
	return r
}

// RequestScope returns a context derived from ctx that keeps what the
// Runtime resolves of one request: its caller (identity.Resolution: an
// API key looked up, a JWT verified, an unparseable source address logged)
// and its rules. Decide, Quota and Acquire, given that request with this
// context or one derived from it, resolve it once: the API function's
// rate decision and its in-flight slots count the same caller, resolved
// once. A scope is for one request, used by one goroutine at a time; a
// different request given within it (another method, path, source
// address, header, stage or API) is resolved on its own and not kept.
func (rt *Runtime) RequestScope(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestScopeKey{}, &requestScope{})
}

type requestScopeKey struct{}

// requestScope is the room a RequestScope keeps a resolution in.
type requestScope struct {
	resolved resolvedRequest
	kept     bool
}

// sameRequest reports whether a and b are one request as far as
// resolving its caller and its rules is concerned: every field they are
// read from is equal.
func sameRequest(a, b edge.Request) bool {
	return a.Method == b.Method && a.Path == b.Path && a.SourceIP == b.SourceIP &&
		a.APIID == b.APIID && a.Stage == b.Stage && a.RouteKey == b.RouteKey &&
		slices.Equal(a.ServedPaths, b.ServedPaths) &&
		maps.Equal(a.Headers, b.Headers) && maps.Equal(a.StageVariables, b.StageVariables)
}

// controlsCache is the network-controls cache decisions under gate read:
// the gate's own once it has one, the runtime's while the key is pending.
func (rt *Runtime) controlsCache(gate *hashedGate) *ratelimit.NetworkControlCache {
	if gate.controls != nil {
		return gate.controls
	}
	return rt.networkControls
}

// liveNetworks are the live network controls in force, as this process
// read them last (ratelimit.NetworkControlCache: at most one HGETALL per
// controls.Propagation, on the request that finds the list older;
// the other requests read memory): gate's, whose read also serves its
// decisions' identity controls, or, while gate is not ready, the
// runtime's. A read that failed, or skipped
// malformed records, is logged within its budget, and the last good list
// stays in force (none before the first read succeeds: Redis then decides
// nothing anyway, and each request meets its route's failure policy). A
// failed read may have taken the whole Redis timeout: deadline is then
// when the decision's own Redis calls must end, so that the request never
// waits on Redis longer than one decision's budget; zero otherwise.
func (rt *Runtime) liveNetworks(ctx context.Context, gate *hashedGate) (list []controls.Network, deadline time.Time) {
	start := time.Now()
	list, err := rt.controlsCache(gate).Get(ctx)
	if err != nil {
		rt.observer.NetworkControlsUnread(ctx, err)
		if errors.Is(err, ratelimit.ErrUnavailable) {
			deadline = start.Add(rt.redisTimeout())
		}
	}
	return list, deadline
}

// redisTimeout is one decision's Redis budget (REDIS_TIMEOUT), as the
// gates apply it.
func (rt *Runtime) redisTimeout() time.Duration {
	if t := rt.cfg.Redis.Timeout; t > 0 {
		return t
	}
	return 100 * time.Millisecond
}

// outcome is the Outcome of the request before its decision: who is
// counted, with the identity's keyed hash, and whether the route fails
// closed.
func (r resolvedRequest) outcome() edge.Outcome {
	return edge.Outcome{
		Caller:       r.who.Caller,
		IdentityHash: r.gate.hashOf(r.who.Caller.Identity),
		FailClosed:   r.rules.FailClosed,
	}
}

// decideResolved decides a request whose caller is known, spending on
// every limit that applies or none, and observes the decision: one EMF
// record and, within the log budget and level, one log line. (A peek, in
// Quota, is not observed: it changes nothing, and counting it would make
// a caller checking its quota look like one being allowed or denied.)
func (rt *Runtime) decideResolved(ctx context.Context, r resolvedRequest) (edge.Outcome, error) {
	out := r.outcome()
	if decidedByNetwork(&out, r.rules.Caller, r.who.Unauthorized) {
		rt.observe(ctx, r, out, nil)
		return out, nil
	}
	rt.noteUnknownPlan(ctx, r)
	req := r.rules
	out.Plan = req.Plan
	// The Redis calls' trace subsegments carry the tier.
	ctx = tracing.WithTier(ctx, out.Caller.Tier)
	ctx, cancel := r.redisBudget(ctx)
	defer cancel()
	res, err := r.gate.gate.Decide(ctx, req.Cost, failurePolicy(out.FailClosed), req.Checks(out.Caller.Identity)...)
	if err != nil {
		err = fmt.Errorf("decide %s for %s: %w", edge.RouteName(r.req), out.Caller.Tier, err)
	}
	out.Result, out.Kind = res, httplimit.KindOf(res, r.who.Unauthorized, err)
	rt.observe(ctx, r, out, err)
	return out, err
}

// observe records a decision that spent: one EMF record and, within the
// log budget and level, one log line.
func (rt *Runtime) observe(ctx context.Context, r resolvedRequest, out edge.Outcome, err error) {
	rt.firstDecided.Do(func() { close(rt.firstDecision) })
	rt.observer.Observe(ctx, observe.Observation{
		Request:    r.req,
		Outcome:    out,
		Credential: r.who.Reason,
		Err:        err,
		Latency:    time.Since(r.start),
	})
}

// noteUnknownPlan logs, once, a plan the caller carries that the stage
// does not configure (its tier's limits apply).
func (rt *Runtime) noteUnknownPlan(ctx context.Context, r resolvedRequest) {
	if p := r.rules.UnknownPlan; p != "" {
		rt.unknownPlans.note(ctx, rt.logger, p, r.who.Caller.Tier)
	}
}

// decidedByNetwork decides out by its source network alone, without a
// Redis call (policy.Caller.NetworkDecision), and reports whether it did.
func decidedByNetwork(out *edge.Outcome, c policy.Caller, unauthorized bool) bool {
	kind, res, ok := c.NetworkDecision(unauthorized)
	if ok {
		out.Kind, out.Result = kind, res
	}
	return ok
}

// failurePolicy is the Gate's policy for a route that fails closed or not.
func failurePolicy(failClosed bool) ratelimit.FailurePolicy {
	if failClosed {
		return ratelimit.FailClosed
	}
	return ratelimit.FailOpen
}
