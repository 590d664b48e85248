package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Decision outcomes, as logged and counted in metrics.
const (
	OutcomeAllowed  = "allowed"
	OutcomeDenied   = "denied"
	OutcomeDegraded = "degraded"
	// OutcomeRejected: refused for another reason than the limit: an
	// unauthorized credential (401) or a fail-closed route Redis could not
	// decide (503).
	OutcomeRejected = "rejected"
	// OutcomeShadowDenied: admitted, though a shadow limit
	// (RATE_LIMIT_SHADOW) would have denied it.
	OutcomeShadowDenied = "shadow-denied"
	// OutcomeBlocked: refused without a Redis call, its source address
	// being in a blocked network (RATE_LIMIT_NETWORKS).
	OutcomeBlocked = "blocked"
	// OutcomeUnlimited: admitted without a Redis call, its source address
	// being in an unlimited network.
	OutcomeUnlimited = "unlimited"
)

// Decide answers one request: who the caller is, which limits apply (the
// caller's tier on the request's stage, and every matching route limit,
// counted for the same identity), then one decision that spends on all of
// them or none.
//
// Unauthorized requests are not errors: Outcome.Unauthorized is set and the
// request was counted against its source IP's anonymous limit. The error is
// non-nil only when the request cannot be decided: a fail-closed route
// while Redis is unavailable (wrapping ratelimit.ErrUnavailable; the
// Outcome still names the caller and FailClosed, and its Result holds the
// RedisLatency of the failed attempt, which the metrics record publishes)
// or limits that can never be decided (ratelimit.ErrInvalid).
func (rt *Runtime) Decide(ctx context.Context, req Request) (Outcome, error) {
	return rt.decide(ctx, req, true)
}

// Peek is Decide without spending anything: the caller's quota as it
// stands (GET /v1/quota). A Redis outage gives the local fallback's view,
// marked degraded, on every route.
//
// Only a caller with a verified identity (or none at all) peeks for free.
// An unknown API key or a bearer token that does not verify is decided
// exactly as Decide would: counted against the source IP's anonymous limit
// (and every route limit of the request), logged, and subject to the
// route's failure policy. Otherwise the quota would be a free, unlogged
// oracle for guessing keys and tokens.
func (rt *Runtime) Peek(ctx context.Context, req Request) (Outcome, error) {
	return rt.decide(ctx, req, false)
}

// Quota answers GET /v1/quota: it spends one call from the caller's
// quota-route limit (RATE_LIMIT_QUOTA, rateLimitQuota, for the caller's
// identity) and, when that admits it, peeks at the caller's tier and route
// limits, which it never spends. When the quota limit denies, the Outcome
// has QuotaDenied set and its Result is that denial: nothing is peeked,
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
// marked degraded. An unknown API key or a bearer token that does not
// verify is decided exactly as Decide would, as for Peek.
func (rt *Runtime) Quota(ctx context.Context, req Request) (Outcome, error) {
	r := rt.resolve(ctx, req)
	if r.who.Unauthorized {
		return rt.decideResolved(ctx, r, true)
	}
	out := Outcome{
		Caller:     r.caller(),
		FailClosed: config.IsFailClosedRequest(rt.cfg.FailClosed, r.path),
	}
	if network := networkOf(rt.cfg.Networks, r.req.SourceIP); network == config.NetworkUnlimited || network == config.NetworkBlocked {
		// No limit applies to such a caller, or none it could ever use:
		// decided without a Redis call, as its other requests are.
		out.Network = network
		out.Result = ratelimit.Result{Allowed: network == config.NetworkUnlimited}
		rt.observe(ctx, r, out, nil)
		return out, nil
	}
	ctx = tracing.WithTier(ctx, out.Caller.Tier)
	quota := ratelimit.Check{Identity: out.Caller.Identity, Limit: r.limits.Quota}
	spent, err := r.gate.gate.Decide(ctx, 1, ratelimit.FailOpen, quota)
	if err != nil {
		err = fmt.Errorf("quota %s for %s: %w", RouteName(r.req), out.Caller.Tier, err)
	}
	out.Result = spent
	out.QuotaDenied = err == nil && !spent.Allowed
	rt.observe(ctx, r, out, err)
	if err != nil || out.QuotaDenied {
		return out, err
	}
	limits := rt.requestLimits(ctx, r, networkOf(rt.cfg.Networks, r.req.SourceIP))
	out.Plan = limits.Plan
	out.Result, err = r.gate.gate.Peek(ctx, 1, limits.Checks(out.Caller.Identity)...)
	if err != nil {
		return out, fmt.Errorf("peek %s for %s: %w", RouteName(r.req), out.Caller.Tier, err)
	}
	return out, nil
}

// resolvedRequest is a request normalised once (method upper-cased, header
// names folded, path read as the serving router reads it), with its
// stage's limits, the gate of the current identity hash key, and its
// caller.
type resolvedRequest struct {
	req    Request
	path   config.RequestPath
	limits *config.Limits
	gate   *hashedGate
	who    identity.Resolution
	// start is when the decision began.
	start time.Time
}

// resolve normalises req and resolves its caller. An anonymous caller
// whose source address does not parse is logged (within its budget).
func (rt *Runtime) resolve(ctx context.Context, req Request) resolvedRequest {
	start := time.Now()
	req.Method = strings.ToUpper(req.Method)
	req.Headers = lowerHeaders(req.Headers)
	// The path as the serving router reads it: decoded, dot segments
	// resolved. Route limits and fail-closed globs match on it, so that no
	// spelling of a path reaches its handler around them.
	path := config.ParseRequestPath(req.Path)
	for _, served := range req.ServedPaths {
		path = path.Union(config.ParseRequestPath(served))
	}
	limits := rt.stages.For(req.StageVariables)
	rt.awaitIdentity(ctx, req.Headers)
	who := rt.resolver.ResolveForAPI(ctx, req.APIID, req.Stage, req.Headers, req.SourceIP, limits.IPv6Prefix)
	if who.InvalidSource {
		rt.observer.invalidSource(ctx, req.SourceIP)
	}
	return resolvedRequest{req: req, path: path, limits: limits, gate: rt.currentGate(ctx), who: who, start: start}
}

// caller is who the request is counted against, with its keyed hash.
func (r resolvedRequest) caller() Caller {
	return Caller{
		Tier:     r.who.Caller.Tier,
		Identity: r.who.Caller.Identity,
		Hash:     r.gate.hashOf(r.who.Caller.Identity),
		APIKey:   r.who.Caller.APIKey,
	}
}

// decide resolves the caller and decides. spend is false for Peek, and is
// overridden for an unauthorized caller, who never peeks for free. Every
// decision that spends is observed: one EMF record and, within the log
// budget and level, one log line. A peek is neither: it changes nothing,
// and counting it would make a caller checking its quota look like one
// being allowed or denied.
func (rt *Runtime) decide(ctx context.Context, req Request, spend bool) (Outcome, error) {
	return rt.decideResolved(ctx, rt.resolve(ctx, req), spend)
}

// decideResolved is decide once the caller is known.
func (rt *Runtime) decideResolved(ctx context.Context, r resolvedRequest, spend bool) (Outcome, error) {
	out := Outcome{
		Caller:       r.caller(),
		Unauthorized: r.who.Unauthorized,
		FailClosed:   config.IsFailClosedRequest(rt.cfg.FailClosed, r.path),
	}
	if r.who.Unauthorized {
		spend = true
	}
	network := networkOf(rt.cfg.Networks, r.req.SourceIP)
	if network == config.NetworkUnlimited || network == config.NetworkBlocked {
		// Decided by the source network alone: no Redis call.
		out.Network = network
		out.Result = ratelimit.Result{Allowed: network == config.NetworkUnlimited}
		if spend {
			rt.observe(ctx, r, out, nil)
		}
		return out, nil
	}
	req := rt.requestLimits(ctx, r, network)
	out.Plan = req.Plan
	checks := req.Checks(out.Caller.Identity)
	// The Redis calls' trace subsegments carry the tier.
	ctx = tracing.WithTier(ctx, out.Caller.Tier)

	var (
		res ratelimit.Result
		err error
	)
	if spend {
		res, err = r.gate.gate.Decide(ctx, req.Cost, failurePolicy(out.FailClosed), checks...)
	} else {
		res, err = r.gate.gate.Peek(ctx, 1, checks...)
	}
	out.Result = res
	if err != nil {
		err = fmt.Errorf("decide %s for %s: %w", RouteName(r.req), out.Caller.Tier, err)
	}
	if spend {
		rt.observe(ctx, r, out, err)
	}
	return out, err
}

// observe records a decision that spent: one EMF record and, within the
// log budget and level, one log line.
func (rt *Runtime) observe(ctx context.Context, r resolvedRequest, out Outcome, err error) {
	rt.observer.observe(ctx, decisionRecord{
		req:        r.req,
		out:        out,
		credential: r.who.Reason,
		err:        err,
		latency:    time.Since(r.start),
	})
}

// requestLimits are the limits of a request on its stage, all for the
// caller's identity: its plan's (its own, else its source network's) when
// that plan is configured, else its tier's, and every route limit
// matching the request, with the request's cost and each limit's shadow
// flag. An unconfigured plan is logged once. Limits of different
// algorithms are decided by one script call per algorithm (see
// ratelimit.Limiter.Decide).
func (rt *Runtime) requestLimits(ctx context.Context, r resolvedRequest, network string) config.RequestLimits {
	plan := r.who.Caller.Plan
	if plan == "" {
		plan = network
	}
	req := r.limits.ForRequest(r.who.Caller.Tier, plan, r.req.Method, r.path)
	if req.UnknownPlan != "" {
		rt.unknownPlans.note(ctx, rt.logger, req.UnknownPlan, r.who.Caller.Tier)
	}
	return req
}

// OutcomeName is how an outcome is logged and counted.
func OutcomeName(o Outcome, err error) string {
	switch {
	case o.Blocked():
		return OutcomeBlocked
	case err != nil || o.Unauthorized:
		return OutcomeRejected
	case o.Exempt():
		return OutcomeUnlimited
	case o.Result.Degraded:
		return OutcomeDegraded
	case o.ShadowDenied():
		return OutcomeShadowDenied
	case o.Result.Allowed:
		return OutcomeAllowed
	default:
		return OutcomeDenied
	}
}

// PrincipalID is the authorizer's principalId of an outcome: the tier and
// the hashed identity (Caller.Hash), e.g. "anonymous:3f1c...", or
// "anonymous:hash-key-unavailable" while the identity hash key is not
// read. It never holds a key, token, user id or IP in clear.
func PrincipalID(o Outcome) string {
	h := o.Caller.Hash
	if h == "" {
		h = IdentityHashUnavailable
	}
	return o.Caller.Tier + ":" + h
}

// IsUnavailable reports whether a Decide error means Redis could not
// decide (as opposed to an undecidable request).
func IsUnavailable(err error) bool { return errors.Is(err, ratelimit.ErrUnavailable) }

// failurePolicy is the Gate's policy for a route that fails closed or not.
func failurePolicy(failClosed bool) ratelimit.FailurePolicy {
	if failClosed {
		return ratelimit.FailClosed
	}
	return ratelimit.FailOpen
}
