// Package policy resolves one request's rules, once: which limits apply
// (with their algorithm, cost, shadow flag and owner), whether the route
// fails closed, what the source network says, and the caller's plan. It
// reads the request as apigw normalised it, the caller as identity resolved
// it and the stage as config parsed it; it decides nothing on Redis.
//
// A request can be read several ways: its path in every spelling a router
// may serve (route.Path), its source address in every form
// (identity.SourceForms), its limits from several owners. Every rule takes
// the strictest reading ("The strictest reading" in docs/contract.md),
// here and nowhere else: any reading's route limits and fail-closed globs
// apply, the highest cost any reading matches is spent, a limit is
// enforced unless every owner that brings it shadows it, in-flight limits
// follow the owner of the rate limits in force (CallerRules.HeldBy), the
// network verdict, static and live, is network.Verdict's, and where the
// address's forms disagree about a network's plan, a caller with no plan
// of its own is held by every reading together.
//
// The functions (internal/instance), make local and every slidegate command
// call Stage.Resolve or Stage.CallerRules: there is no second copy.
package policy

import (
	"slices"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Stage is what one request is resolved against: the stage's parsed
// configuration (config.StageCache.For: its limits, and the environment's
// networks and fail-closed globs) and the live network controls.
type Stage struct {
	// Limits are the stage's tiers, plans, routes, costs, shadow list,
	// networks and fail-closed globs.
	Limits *config.Limits
	// NetworkControls are the live network controls in force, as the
	// process last read them (controls.NetworkControlCache); nil for
	// none. They join Limits.Networks in the network verdict
	// (network.Read).
	NetworkControls []controls.Network
}

// Request is a request in all its readings.
type Request struct {
	// Method is the HTTP method, upper case.
	Method string
	// Path is the request path in every reading: the path and the REST
	// paths it may be served as (apigw.Request.ServedPaths), united.
	Path route.Path
	// SourceIP is the source address as API Gateway reports it.
	SourceIP string
}

// matches reports whether the request is one of route's: its method and
// any reading of its path.
func (req Request) matches(r route.Route) bool {
	return route.MethodMatches(r.Method, req.Method) && req.Path.Matches(r.Path)
}

// Read reads a normalised request: its path in every spelling a router
// may serve it as.
func Read(req apigw.Request) Request {
	path := route.ParsePath(req.Path)
	for _, served := range req.ServedPaths {
		path = path.Union(route.ParsePath(served))
	}
	return Request{Method: req.Method, Path: path, SourceIP: req.SourceIP}
}

// CallerRules are a caller's rules before any request: what its source
// network says, its plan and its own limits.
type CallerRules struct {
	// Network is what the source network says (network.Read): its verdict,
	// the plan it names, the live control behind it.
	Network network.Verdict
	// Plan is the plan whose limits apply, "" when they are the tier's.
	Plan string
	// UnknownPlan is the plan the caller carries when no such plan is
	// configured on the stage: the tier's limits apply instead.
	UnknownPlan string
	// Owner is the plan or tier whose limits are the caller's own.
	Owner string
	// Tier is the caller's tier (anonymous for an unknown one).
	Tier string
	// Own are the caller's own limits: its plan's, or its tier's; when
	// every limit of its plan is shadowed, the plan's followed by the
	// tier's, enforced beneath it.
	Own []config.OwnedLimit
	// HeldBy are the plans and tier whose limits hold the caller, in
	// force: Owner, but the tier beneath a plan wholly in shadow, and
	// every plan of Network.Plans not wholly in shadow with the tier. Its
	// in-flight limits are theirs (Stage.EveryInFlight): they follow the
	// same owner as its rate limits.
	HeldBy []string
}

// Rules are a request's rules.
type Rules struct {
	CallerRules
	// Cost is what the request spends on every limit: the highest
	// RATE_LIMIT_COSTS entry any reading matches, 1 when none does.
	Cost int64
	// Limits are the caller's own followed by those of every route limit
	// any reading matches, each key once.
	Limits []config.OwnedLimit
	// FailClosed is true when any reading matches a fail-closed glob.
	FailClosed bool
	// InFlight are the request's in-flight limits (RATE_LIMIT_CONCURRENCY,
	// see Stage.EveryInFlight and Resolve): the caller's own entry, then every route entry
	// any reading matches.
	InFlight []ratelimit.ConcurrencyLimit
}

// Checks returns the limits as checks for identity, in order, the shadow
// limits as shadow checks (ratelimit.Check.Shadow).
func (r Rules) Checks(identity string) []ratelimit.Check {
	checks := make([]ratelimit.Check, len(r.Limits))
	for i, l := range r.Limits {
		checks[i] = ratelimit.Check{Identity: identity, Limit: l.Limit, Shadow: l.Shadow}
	}
	return checks
}

// Resolve returns the rules of req for caller (identity.Resolution's
// Caller: for an unauthorized request, the anonymous caller of the source
// address).
func (s Stage) Resolve(req Request, caller identity.Caller) Rules {
	r := Rules{CallerRules: s.CallerRules(caller, req.SourceIP), Cost: 1}
	r.FailClosed = s.failClosed(req.Path)
	for _, c := range s.Limits.Costs {
		if c.Cost > r.Cost && req.matches(c.Route) {
			r.Cost = c.Cost
		}
	}
	r.Limits = make([]config.OwnedLimit, 0, len(r.Own)+2)
	for _, l := range r.Own {
		r.Limits = add(r.Limits, l)
	}
	for _, rl := range s.Limits.Routes {
		if req.matches(rl.Route) {
			r.Limits = s.addList(r.Limits, rl.Limits)
		}
	}
	r.InFlight = s.inFlight(r.CallerRules, req.matches)
	return r
}

// EveryInFlight is every in-flight limit that counts a caller whatever
// its requests: its own entry and every route entry. It is what slidegate
// inspect shows.
func (s Stage) EveryInFlight(c CallerRules) []ratelimit.ConcurrencyLimit {
	return s.inFlight(c, func(route.Route) bool { return true })
}

// inFlight are c's in-flight limits for the route entries that routeMatches
// accepts: the entry of each plan or tier that holds c (CallerRules.HeldBy),
// or the tier's for a plan that has none (a plan never lifts its tier's
// in-flight limit by saying nothing), each once, then every accepted route
// entry, in order (their Lease is the instance's to set). A blocked or
// unlimited network's caller has none.
func (s Stage) inFlight(c CallerRules, routeMatches func(route.Route) bool) []ratelimit.ConcurrencyLimit {
	if c.Network.Verdict != httplimit.NetworkLimits {
		return nil
	}
	conc := s.Limits.Concurrency
	var out []ratelimit.ConcurrencyLimit
	for _, owner := range c.HeldBy {
		n, ok := conc.Owners[owner]
		if !ok {
			owner = c.Tier
			if n, ok = conc.Owners[owner]; !ok {
				continue
			}
		}
		if !slices.ContainsFunc(out, func(l ratelimit.ConcurrencyLimit) bool { return l.Name == owner }) {
			out = append(out, ratelimit.ConcurrencyLimit{Name: owner, Max: n})
		}
	}
	for _, r := range conc.Routes {
		if routeMatches(r.Route) {
			out = append(out, ratelimit.ConcurrencyLimit{Name: r.Name(), Max: r.Max})
		}
	}
	return out
}

// IsFailClosed reports whether a request of path (as received) fails
// closed: whether any reading of it matches a fail-closed glob.
func (s Stage) IsFailClosed(path string) bool { return s.failClosed(route.ParsePath(path)) }

func (s Stage) failClosed(p route.Path) bool {
	return slices.ContainsFunc(s.Limits.FailClosed, p.Matches)
}

// RouteLimits are the route limits a request of method (upper case, or
// "ANY" for a route of every method) and path (as received) is checked
// against.
func (s Stage) RouteLimits(method, path string) []config.RouteLimit {
	p := route.ParsePath(path)
	var out []config.RouteLimit
	for _, r := range s.Limits.Routes {
		if (method == "ANY" || route.MethodMatches(r.Method, method)) && p.Matches(r.Path) {
			out = append(out, r)
		}
	}
	return out
}

// CallerRules resolves a caller's own rules: what its source network says
// (network.Read, with the live network controls), its plan (its own, else its network's) when configured on the stage,
// else its tier, and the limits of that plan or tier with their shadow
// flags. sourceIP may be "" (no network applies).
func (s Stage) CallerRules(c identity.Caller, sourceIP string) CallerRules {
	out := CallerRules{Network: network.Read(s.Limits.Networks, s.NetworkControls, sourceIP)}
	plan := c.Plan
	if plan == "" {
		plan = out.Network.Plan
	}
	tier := tierName(c.Tier)
	out.Tier = tier
	if plan == "" && len(out.Network.Plans) > 0 {
		return s.everyReading(out)
	}
	if plan != "" {
		if list, ok := s.Limits.Plans[plan]; ok {
			out.Plan, out.Owner = plan, plan
			out.Own = s.addList(nil, list)
			out.HeldBy = []string{plan}
			if allShadow(out.Own) {
				// A plan tried in shadow: its callers keep the limits
				// they had, their tier's, enforced beneath it, the
				// in-flight limit included.
				out.Own = s.addList(out.Own, s.Limits.Tiers.ForTier(tier))
				out.HeldBy = []string{tier}
			}
			return out
		}
		out.UnknownPlan = plan
	}
	out.Owner, out.HeldBy = tier, []string{tier}
	out.Own = s.addList(nil, s.Limits.Tiers.ForTier(tier))
	return out
}

// everyReading completes out, a caller with no plan of its own whose
// address's forms disagree about a network's plan, held by every reading
// together: the limits of each configured plan any form names (with their
// shadow flags), then its tier's, enforced. A plan wholly in shadow holds
// nothing beyond; the tier is the owner (Owner) and holds always. An
// unconfigured plan is reported as UnknownPlan (the first such).
func (s Stage) everyReading(out CallerRules) CallerRules {
	for _, p := range out.Network.Plans {
		list, ok := s.Limits.Plans[p]
		if !ok {
			if out.UnknownPlan == "" {
				out.UnknownPlan = p
			}
			continue
		}
		own := s.addList(nil, list)
		for _, l := range own {
			out.Own = add(out.Own, l)
		}
		if !allShadow(own) {
			out.HeldBy = append(out.HeldBy, p)
		}
	}
	out.Own = s.addList(out.Own, s.Limits.Tiers.ForTier(out.Tier))
	out.Owner, out.HeldBy = out.Tier, append(out.HeldBy, out.Tier)
	return out
}

// EveryLimit is every limit that counts a caller whatever its requests:
// its own, every route limit's (a request counts against those its route
// matches) and the quota route's, each key once; none is marked shadow.
// It is what slidegate inspect shows and reset clears.
func (s Stage) EveryLimit(c CallerRules) []config.OwnedLimit {
	out := append([]config.OwnedLimit(nil), c.Own...)
	for _, rl := range s.Limits.Routes {
		out = s.addList(out, rl.Limits)
	}
	quota := s.Limits.Quota
	quota.Shadow = false
	return add(out, quota)
}

// addList adds the limits of a list with their shadow flags.
func (s Stage) addList(out []config.OwnedLimit, list config.LimitList) []config.OwnedLimit {
	for _, x := range list {
		x.Shadow = s.Limits.Shadow.Has(x.Owner, x.Name)
		out = add(out, x)
	}
	return out
}

// add adds l to out, or, when out holds the same limit already (the same
// key for one identity), keeps that one, enforced unless both say shadow.
func add(out []config.OwnedLimit, l config.OwnedLimit) []config.OwnedLimit {
	if i := slices.IndexFunc(out, func(o config.OwnedLimit) bool { return o.Limit == l.Limit }); i >= 0 {
		out[i].Shadow = out[i].Shadow && l.Shadow
		return out
	}
	return append(out, l)
}

// allShadow reports whether limits are some, every one of them shadowed.
func allShadow(limits []config.OwnedLimit) bool {
	return len(limits) > 0 && !slices.ContainsFunc(limits, func(l config.OwnedLimit) bool { return !l.Shadow })
}

// tierName is tier, or the anonymous tier for an unknown one (the
// smallest promise, as config.Tiers.ForTier).
func tierName(tier string) string {
	switch tier {
	case identity.TierOrg, identity.TierUser:
		return tier
	}
	return identity.TierAnonymous
}
