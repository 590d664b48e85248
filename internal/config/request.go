package config

import (
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// AppliedLimit is one limit a request is checked against.
type AppliedLimit struct {
	// Limit is the budget.
	Limit ratelimit.Limit
	// Shadow is true when the limit is evaluated and reported but not
	// enforced (RATE_LIMIT_SHADOW).
	Shadow bool
}

// RequestLimits are the limits that apply to one request on a stage and
// what the request spends on them.
type RequestLimits struct {
	// Plan is the plan whose limits apply, "" when they are the tier's.
	Plan string
	// UnknownPlan is the plan the caller carries when no such plan is
	// configured on the stage: the tier's limits apply instead.
	UnknownPlan string
	// Cost is what the request spends on every limit (RATE_LIMIT_COSTS;
	// 1 when no entry matches).
	Cost int64
	// Limits are the caller's own (its plan's, or its tier's) followed by
	// those of every route limit matching the request.
	Limits []AppliedLimit
}

// Checks returns the limits as checks for identity, in order, the shadow
// limits as shadow checks (ratelimit.Check.Shadow).
func (r RequestLimits) Checks(identity string) []ratelimit.Check {
	checks := make([]ratelimit.Check, len(r.Limits))
	for i, l := range r.Limits {
		checks[i] = ratelimit.Check{Identity: identity, Limit: l.Limit, Shadow: l.Shadow}
	}
	return checks
}

// CallerLimits are the limits of a caller of tier carrying plan ("" for
// none): the plan's when it is configured on the stage, otherwise the
// tier's, with unknownPlan set to plan when plan is not "" and not
// configured. owner is the plan or tier name.
func (l *Limits) CallerLimits(tier, plan string) (list LimitList, owner, unknownPlan string) {
	if plan != "" {
		if p, ok := l.Plans[plan]; ok {
			return p, plan, ""
		}
		unknownPlan = plan
	}
	switch tier {
	case identity.TierOrg:
		return l.Tiers.Org, identity.TierOrg, unknownPlan
	case identity.TierUser:
		return l.Tiers.User, identity.TierUser, unknownPlan
	default:
		return l.Tiers.Anonymous, identity.TierAnonymous, unknownPlan
	}
}

// ForRequest resolves the limits of a request: the caller's own (plan or
// tier, see CallerLimits), every route limit matching method (upper case)
// and path, the request's cost and each limit's shadow flag.
func (l *Limits) ForRequest(tier, plan, method string, path RequestPath) RequestLimits {
	own, owner, unknown := l.CallerLimits(tier, plan)
	out := RequestLimits{UnknownPlan: unknown, Cost: CostFor(l.Costs, method, path)}
	if unknown == "" && plan != "" {
		out.Plan = plan
	}
	out.Limits = make([]AppliedLimit, 0, len(own)+2)
	for _, x := range own {
		out.Limits = append(out.Limits, AppliedLimit{Limit: x.Limit, Shadow: l.Shadow.Has(owner, x.Name)})
	}
	for _, r := range l.Routes {
		if r.MatchesRequest(method, path) {
			name := r.Name()
			for _, x := range r.Limits {
				out.Limits = append(out.Limits, AppliedLimit{Limit: x.Limit, Shadow: l.Shadow.Has(name, x.Name)})
			}
		}
	}
	return out
}
