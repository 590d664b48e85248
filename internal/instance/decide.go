package instance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/config"
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
// of them or none: Resolve(ctx, req).Decide(ctx), for a handler that answers
// a request once (the authorizer).
func (rt *Runtime) Decide(ctx context.Context, req apigw.Request) (apigw.Outcome, error) {
	return rt.Resolve(ctx, req).Decide(ctx)
}

// Resolution is one request as the Runtime resolves it, once, for every
// answer it gets: its stage's limits, and, on the first answer that needs
// them (Decide, Quota, Acquire), its caller (identity.Resolution: an API
// key looked up, a bearer token verified, an unparseable source address
// logged) and its rules (policy.Stage.Resolve: the request in every
// reading, the strictest taken). A Resolution is for one request, used by
// one goroutine at a time; a handler that answers a request in several steps
// (the API function's rate decision, then its in-flight slots) carries it
// from one to the next (the request's context), and every step counts the
// same caller.
type Resolution struct {
	rt     *Runtime
	req    apigw.Request
	limits *config.Limits
	// start is when the resolution began.
	start time.Time

	// resolved is set once the caller and its rules are (resolveCaller).
	resolved bool
	rules    policy.Rules
	gate     *hashedGate
	who      identity.Resolution
	// redisDeadline, when set, is when the next Redis calls must end: a
	// read of the network controls that failed spent the Redis budget
	// (liveNetworks), which the first answer then shares (redisBudget).
	redisDeadline time.Time
}

// Resolve begins the resolution of req, which must be normalised as the
// constructors of apigw build it (upper-case method, lower-case header names):
// its stage's limits now, its caller and its rules on the first answer
// that needs them.
func (rt *Runtime) Resolve(_ context.Context, req apigw.Request) *Resolution {
	return &Resolution{rt: rt, req: req, limits: rt.stages.For(req.StageVariables), start: time.Now()}
}

// Request is the request resolved.
func (r *Resolution) Request() apigw.Request { return r.req }

// resolveCaller resolves the caller and its rules, once. An anonymous
// caller whose source address does not parse is logged (within its
// budget).
func (r *Resolution) resolveCaller(ctx context.Context) {
	if r.resolved {
		return
	}
	rt, req := r.rt, r.req
	rt.awaitIdentity(ctx, req.Headers)
	r.who = rt.resolver.ResolveForAPI(ctx, req.APIID, req.Stage, req.Headers, req.SourceIP, r.limits.IPv6Prefix)
	if r.who.InvalidSource {
		rt.observer.InvalidSource(ctx, req.SourceIP)
	}
	stage := policy.Stage{Limits: r.limits}
	r.gate = rt.currentGate(ctx)
	stage.NetworkControls, r.redisDeadline = rt.liveNetworks(ctx, r.gate)
	r.rules = stage.Resolve(policy.Read(req), r.who.Caller)
	r.resolved = true
}

// Decide decides the request: the caller's limits and its route limits,
// spent on all or none. A request from a blocked or an unlimited network
// (RATE_LIMIT_NETWORKS, or a live network control: network.Read)
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
// (see apigw.Kind). Unauthorized requests are not errors: they were counted
// against their source IP's anonymous limit (Kind Unauthorized or
// UnauthorizedOverLimit). The error is non-nil only when the request
// cannot be decided, and then says why, for the log: a fail-closed route
// while Redis is unavailable (Kind Unavailable, the error wrapping
// ratelimit.ErrUnavailable; the Outcome still names the caller and
// FailClosed, and its Result holds the RedisLatency of the failed attempt,
// which the metrics record publishes) or limits that can never be decided
// (Kind Undecidable, ratelimit.ErrInvalid).
//
// The decision is observed: one EMF record and, within the log budget and
// level, one log line. (A peek, in Quota, is not observed: it changes
// nothing, and counting it would make a caller checking its quota look
// like one being allowed or denied.)
func (r *Resolution) Decide(ctx context.Context) (apigw.Outcome, error) {
	r.resolveCaller(ctx)
	rt := r.rt
	out := r.outcome()
	if decidedByNetwork(&out, r.rules.CallerRules, r.who.Unauthorized) {
		rt.observe(ctx, r, out, nil)
		return out, nil
	}
	rt.noteUnknownPlan(ctx, r)
	out.Plan = r.rules.Plan
	// The Redis calls' trace subsegments carry the tier.
	ctx = tracing.WithTier(ctx, out.Caller.Tier)
	ctx, cancel := r.redisBudget(ctx)
	defer cancel()
	res, err := r.gate.gate.Decide(ctx, r.rules.Cost, failurePolicy(out.FailClosed), r.rules.Checks(out.Caller.Identity)...)
	if err != nil {
		err = fmt.Errorf("decide %s for %s: %w", apigw.RouteName(r.req), out.Caller.Tier, err)
	}
	out.Result, out.Kind = res, httplimit.KindOf(httplimit.Decided{Unauthorized: r.who.Unauthorized, Result: res, Err: err})
	rt.observe(ctx, r, out, err)
	return out, err
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
func (r *Resolution) Quota(ctx context.Context) (apigw.Outcome, error) {
	r.resolveCaller(ctx)
	if r.who.Unauthorized {
		return r.Decide(ctx)
	}
	rt := r.rt
	out := r.outcome()
	if decidedByNetwork(&out, r.rules.CallerRules, false) {
		// No limit applies to such a caller, or none it could ever use:
		// decided without a Redis call, as its other requests are.
		rt.observe(ctx, r, out, nil)
		return out, nil
	}
	ctx = tracing.WithTier(ctx, out.Caller.Tier)
	ctx, cancel := r.redisBudget(ctx)
	defer cancel()
	quota := ratelimit.Check{Identity: out.Caller.Identity, Limit: r.limits.Quota.Limit}
	spent, err := r.gate.gate.Decide(ctx, 1, ratelimit.FailOpen, quota)
	if err != nil {
		err = fmt.Errorf("quota %s for %s: %w", apigw.RouteName(r.req), out.Caller.Tier, err)
	}
	out.Result, out.Kind = spent, httplimit.KindOf(httplimit.Decided{Result: spent, Err: err})
	out.QuotaDenied = err == nil && !spent.Allowed
	rt.observe(ctx, r, out, err)
	if err != nil || out.QuotaDenied {
		return out, err
	}
	rt.noteUnknownPlan(ctx, r)
	out.Plan = r.rules.Plan
	out.Result, err = r.gate.gate.Peek(ctx, 1, r.rules.Checks(out.Caller.Identity)...)
	if err != nil {
		err = fmt.Errorf("peek %s for %s: %w", apigw.RouteName(r.req), out.Caller.Tier, err)
	}
	out.Kind = httplimit.KindOf(httplimit.Decided{Result: out.Result, Err: err})
	return out, err
}

// redisBudget is ctx bounded by the resolution's redisDeadline, when it
// has one; the deadline is spent by the first answer that takes it, since
// no later read of the network controls spent the later answers' budget.
func (r *Resolution) redisBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := r.redisDeadline
	r.redisDeadline = time.Time{}
	if deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, deadline)
}

// controlsCache is the network-controls cache decisions under gate read:
// the gate's own once it has one, the runtime's while the key is pending.
func (rt *Runtime) controlsCache(gate *hashedGate) *controls.NetworkControlCache {
	if gate.controls != nil {
		return gate.controls
	}
	return rt.networkControls
}

// liveNetworks are the live network controls in force, as this process
// read them last (controls.NetworkControlCache: at most one HGETALL per
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
			deadline = start.Add(rt.cfg.Redis.Timeout)
		}
	}
	return list, deadline
}

// outcome is the Outcome of the request before its decision: who is
// counted, with the identity's keyed hash, and whether the route fails
// closed.
func (r *Resolution) outcome() apigw.Outcome {
	return apigw.Outcome{
		Caller:       r.who.Caller,
		IdentityHash: r.gate.hashOf(r.who.Caller.Identity),
		FailClosed:   r.rules.FailClosed,
	}
}

// observe records a decision that spent: one EMF record and, within the
// log budget and level, one log line.
func (rt *Runtime) observe(ctx context.Context, r *Resolution, out apigw.Outcome, err error) {
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
func (rt *Runtime) noteUnknownPlan(ctx context.Context, r *Resolution) {
	if p := r.rules.UnknownPlan; p != "" {
		rt.unknownPlans.note(ctx, rt.logger, p, r.who.Caller.Tier)
	}
}

// decidedByNetwork decides out by its source network alone, without a
// Redis call (network.Verdict.Decided), and reports whether it did.
func decidedByNetwork(out *apigw.Outcome, c policy.CallerRules, unauthorized bool) bool {
	d, ok := c.Network.Decided(unauthorized)
	if ok {
		out.Kind, out.Result = httplimit.KindOf(d), d.Result
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

// hashedGate is a gate together with the hasher its limiter's keys are
// made with.
type hashedGate struct {
	gate   *ratelimit.Gate
	hasher identity.Hasher
	// ready is false while a configured key has not been read: gate then
	// decides as if Redis were unavailable and hasher is not used.
	ready bool
	// controls is the live network controls as gate's Limiter reads them:
	// one read of the network-controls hash serves the network controls
	// and the identity controls the decisions watch (the Limiter's control
	// watch), instead of one read each. Nil for a gate that is not ready,
	// whose Limiter has no Redis: Runtime.networkControls serves then.
	controls *controls.NetworkControlCache
}

// hashOf is the identity's hash for logs and principal ids, or
// apigw.IdentityHashUnavailable.
func (g *hashedGate) hashOf(id string) string {
	if !g.ready {
		return apigw.IdentityHashUnavailable
	}
	return g.hasher.Hash(id)
}

// maxUnknownPlans bounds the unconfigured plan names an instance
// remembers having logged: plans come from signed tokens and the
// operator's own key lists, so a handful at most; beyond the bound, no
// more are logged.
const maxUnknownPlans = 256

// unknownPlans logs each plan a caller carries but no configuration
// names, once per instance: such a caller gets its tier's limits, never a
// fresh limit of its own. It is safe for concurrent use.
type unknownPlans struct {
	mu     sync.Mutex
	logged map[string]struct{}
}

// note logs plan the first time it is seen.
func (u *unknownPlans) note(ctx context.Context, logger *slog.Logger, plan, tier string) {
	u.mu.Lock()
	_, seen := u.logged[plan]
	full := len(u.logged) >= maxUnknownPlans
	if !seen && !full {
		if u.logged == nil {
			u.logged = make(map[string]struct{})
		}
		u.logged[plan] = struct{}{}
	}
	u.mu.Unlock()
	if seen || full {
		return
	}
	logger.LogAttrs(ctx, slog.LevelWarn, "caller's plan is not configured: its tier's limits apply (RATE_LIMIT_PLANS, rateLimitPlan<Plan>)",
		slog.String("unknownPlan", plan), slog.String("tier", tier))
}
