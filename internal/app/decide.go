package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/config"
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

// decide resolves the caller and decides. spend is false for Peek, and is
// overridden for an unauthorized caller, who never peeks for free. Every
// decision that spends is observed: one EMF record and, within the log
// budget and level, one log line. A peek is neither: it changes nothing,
// and counting it would make a caller checking its quota look like one
// being allowed or denied.
func (rt *Runtime) decide(ctx context.Context, req Request, spend bool) (Outcome, error) {
	start := time.Now()
	req.Method = strings.ToUpper(req.Method)
	req.Headers = lowerHeaders(req.Headers)

	// The path as the serving router reads it: decoded, dot segments
	// resolved. Route limits and fail-closed globs match on it, so that no
	// spelling of a path reaches its handler around them.
	path := config.ParseRequestPath(req.Path)

	limits := rt.stages.For(req.StageVariables)
	hashed := rt.currentGate(ctx)
	who := rt.resolver.ResolveForAPI(ctx, req.APIID, req.Stage, req.Headers, req.SourceIP, limits.IPv6Prefix)
	out := Outcome{
		Caller: Caller{
			Tier:     who.Caller.Tier,
			Identity: who.Caller.Identity,
			Hash:     hashed.hashOf(who.Caller.Identity),
			APIKey:   who.Caller.APIKey,
		},
		Unauthorized: who.Unauthorized,
		FailClosed:   config.IsFailClosedRequest(rt.cfg.FailClosed, path),
	}
	if who.InvalidSource {
		rt.observer.invalidSource(ctx, req.SourceIP)
	}
	checks := checksFor(limits, out.Caller, req.Method, path)
	// The Redis calls' trace subsegments carry the tier.
	ctx = tracing.WithTier(ctx, out.Caller.Tier)
	if who.Unauthorized {
		spend = true
	}

	var (
		res ratelimit.Result
		err error
	)
	if spend {
		res, err = hashed.gate.Decide(ctx, 1, out.FailClosed, checks...)
	} else {
		res, err = hashed.gate.Peek(ctx, 1, checks...)
	}
	out.Result = res
	if err != nil {
		err = fmt.Errorf("decide %s %s for %s: %w", clip(req.Method, maxMethodLen), clip(req.Path, maxPathLen), out.Caller.Tier, err)
	}
	if spend {
		rt.observer.observe(ctx, decisionRecord{
			req:        req,
			out:        out,
			credential: who.Reason,
			err:        err,
			latency:    time.Since(start),
		})
	}
	return out, err
}

// checksFor are the limits of a request on a stage, all for the caller's
// identity: its tier, and every route limit matching method (upper case)
// and path. Limits of different algorithms are decided by one script call
// per algorithm (see ratelimit.Limiter.Decide).
func checksFor(limits *config.Limits, c Caller, method string, path config.RequestPath) []ratelimit.Check {
	checks := make([]ratelimit.Check, 0, 2)
	checks = append(checks, ratelimit.Check{Identity: c.Identity, Limit: limits.Tiers.ForTier(c.Tier)})
	for _, r := range limits.Routes {
		if r.MatchesRequest(method, path) {
			checks = append(checks, ratelimit.Check{Identity: c.Identity, Limit: r.Limit})
		}
	}
	return checks
}

// OutcomeName is how an outcome is logged and counted.
func OutcomeName(o Outcome, err error) string {
	switch {
	case err != nil || o.Unauthorized:
		return OutcomeRejected
	case o.Result.Degraded:
		return OutcomeDegraded
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
