package config

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Stage variable names that override the environment per request.
const (
	StageVarAnonymous  = "rateLimitAnonymous"
	StageVarUser       = "rateLimitUser"
	StageVarOrg        = "rateLimitOrg"
	StageVarAlgorithm  = "rateLimitAlgorithm"
	StageVarIPv6Prefix = "rateLimitIpv6Prefix"
	StageVarQuota      = "rateLimitQuota"
)

// maxStageEntries bounds the stage cache. A REST API has a handful of
// stages; the bound only matters if stage variables were somehow
// attacker-controlled (they are not: they come from the deployment).
const maxStageEntries = 64

// Limits are the rules one request is resolved against (internal/policy):
// the limits that apply on one stage (the tiers, the plans and the route
// limits, each in the stage's algorithm unless it names its own, with the
// costs and the shadow list) and the environment's networks and
// fail-closed globs, which no stage variable changes. Config holds the
// environment's; StageCache.For a stage's.
type Limits struct {
	// Tiers are the per-caller limits of the stage.
	Tiers Tiers
	// Plans are the plans' limits of the stage (RATE_LIMIT_PLANS and the
	// rateLimitPlan<Name> stage variables).
	Plans Plans
	// Routes are the per-route limits (RATE_LIMIT_ROUTES), checked for the
	// caller's identity alongside its tier or plan.
	Routes []RouteLimit
	// Costs are the units requests of some routes spend (RATE_LIMIT_COSTS).
	Costs []RouteCost
	// Shadow are the limits evaluated but not enforced (RATE_LIMIT_SHADOW,
	// rateLimitShadow).
	Shadow Shadow
	// IPv6Prefix is the prefix length an IPv6 anonymous caller is counted
	// per (identity.SourceIdentity).
	IPv6Prefix int
	// Quota is the limit of GET /v1/quota per caller (RATE_LIMIT_QUOTA,
	// rateLimitQuota), owned by QuotaLimitName: each quota call spends
	// one from it, while the caller's other limits are only peeked.
	Quota OwnedLimit
	// Concurrency are the in-flight limits (RATE_LIMIT_CONCURRENCY,
	// rateLimitConcurrency).
	Concurrency Concurrency
	// Networks map source networks to a plan, unlimited or blocked
	// (RATE_LIMIT_NETWORKS).
	Networks network.Networks
	// FailClosed are the route globs that fail closed
	// (RATE_LIMIT_FAIL_CLOSED).
	FailClosed []route.PathGlob
}

// StageValues are the values of the stage variables a Limits is built
// from, trimmed; an empty value keeps the environment's. Plans holds the
// rateLimitPlan<Name> variables as sorted "name=value" lines.
type StageValues struct {
	Anonymous, User, Org, Algorithm, IPv6Prefix, Quota, Shadow, Plans, Concurrency string
}

// StageValuesOf reads the stage variables a Limits is built from out of
// an event's stage variables.
func StageValuesOf(stageVars map[string]string) StageValues {
	return StageValues{
		Anonymous:   strings.TrimSpace(stageVars[StageVarAnonymous]),
		User:        strings.TrimSpace(stageVars[StageVarUser]),
		Org:         strings.TrimSpace(stageVars[StageVarOrg]),
		Algorithm:   strings.TrimSpace(stageVars[StageVarAlgorithm]),
		IPv6Prefix:  strings.TrimSpace(stageVars[StageVarIPv6Prefix]),
		Quota:       strings.TrimSpace(stageVars[StageVarQuota]),
		Shadow:      strings.TrimSpace(stageVars[StageVarShadow]),
		Plans:       stagePlansKey(stageVars),
		Concurrency: strings.TrimSpace(stageVars[StageVarConcurrency]),
	}
}

// StageCache resolves stage variables over the environment's limits. Each
// distinct set of values is parsed once and cached (bad values are
// reported once, when first seen); the cache is bounded, and safe for
// concurrent use. A request whose stage variables are the set the cache
// last answered (a warm instance serves one stage) finds its limits
// without any parsing: no trimming, no key built.
type StageCache struct {
	base *Config
	// report receives the parse errors of a newly seen set of values.
	report func(error)
	// restarts, when set, receives RestartWarnings of the environment's
	// limits against a newly seen set of values.
	restarts func(string)
	// last is the variable set last answered and its limits.
	last atomic.Pointer[stageEntry]
	// load gives the limits of a set For did not last answer (parse). It
	// is the cache's loader, as a cache takes one: a request looks its
	// stage up, and only a set not seen before reaches the parsers.
	load func(stageVars map[string]string) *Limits

	mu      sync.Mutex
	entries map[StageValues]*Limits
}

// stageEntry is one set of stage variables, as an event carries them, and
// the limits parsed from it.
type stageEntry struct {
	vars   map[string]string
	limits *Limits
}

// NewStageCache returns a cache over cfg's environment limits; report
// (which may be nil) is called with the errors of each newly parsed set of
// stage variables.
func NewStageCache(cfg *Config, report func(error)) *StageCache {
	if report == nil {
		report = func(error) {}
	}
	c := &StageCache{
		base:    cfg,
		report:  report,
		entries: make(map[StageValues]*Limits),
	}
	c.load = c.parse
	return c
}

// ReportRestarts makes the cache call warn, once per newly seen set of
// stage variables, with each of RestartWarnings(environment's limits,
// stage's limits): a limit whose window or algorithm the stage changes
// starts its callers afresh on the stage (its keys are not the
// environment's). A function's runtime logs them, as slidegate check
// reports them. Call it before the cache is shared; it returns c.
func (c *StageCache) ReportRestarts(warn func(string)) *StageCache {
	c.restarts = warn
	return c
}

// For returns the limits of a stage with the given stage variables. The
// result is shared: callers must not modify it.
func (c *StageCache) For(stageVars map[string]string) *Limits {
	if len(stageVars) == 0 {
		return &c.base.Limits
	}
	e := c.last.Load()
	if e == nil || !maps.Equal(e.vars, stageVars) {
		// A set this instance did not last answer: looked up, or parsed
		// when first seen.
		e = &stageEntry{vars: maps.Clone(stageVars), limits: c.load(stageVars)}
		c.last.Store(e)
	}
	return e.limits
}

// parse returns the limits of a set of stage variables the cache did not
// last answer: the values slidegate reads from them are its key, parsed
// when first seen.
func (c *StageCache) parse(stageVars map[string]string) *Limits {
	key := StageValuesOf(stageVars)
	if key == (StageValues{}) {
		return &c.base.Limits
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.entries[key]; ok {
		return l
	}
	l, err := ResolveStage(c.base, key)
	if err != nil {
		c.report(err)
	}
	if c.restarts != nil {
		for _, msg := range RestartWarnings(&c.base.Limits, l) {
			c.restarts(msg)
		}
	}
	if len(c.entries) >= maxStageEntries {
		clear(c.entries)
	}
	c.entries[key] = l
	return l
}

// ResolveStage parses stage variable values over cfg's environment limits.
// An empty value keeps the environment's; a bad one is reported and the
// environment's used. Stage limits some RATE_LIMIT_COSTS entry could never
// pay are reported and the environment's limits used on the stage. The
// returned Limits is always usable.
func ResolveStage(cfg *Config, v StageValues) (*Limits, error) {
	var errs []error
	report := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	prefix, err := parseIPv6Prefix("stage variable "+StageVarIPv6Prefix, v.IPv6Prefix, cfg.IPv6Prefix)
	report(err)
	alg, err := parseAlgorithm("stage variable "+StageVarAlgorithm, v.Algorithm, cfg.Tiers.Algorithm)
	report(err)
	if err := envFitsAlgorithm(cfg, alg); err != nil {
		report(badValue("stage variable "+StageVarAlgorithm, v.Algorithm, err, cfg.Tiers.Algorithm))
		alg = cfg.Tiers.Algorithm
	}
	tiers := Tiers{Algorithm: alg}
	tiers.Anonymous, err = stageList(StageVarAnonymous, identity.TierAnonymous, v.Anonymous, cfg.Tiers.Anonymous, alg)
	report(err)
	tiers.User, err = stageList(StageVarUser, identity.TierUser, v.User, cfg.Tiers.User, alg)
	report(err)
	tiers.Org, err = stageList(StageVarOrg, identity.TierOrg, v.Org, cfg.Tiers.Org, alg)
	report(err)
	plans, err := stagePlans(cfg.Plans, v.Plans, alg)
	report(err)
	quotaLimit, err := stageQuota(v.Quota, cfg.Quota, alg)
	report(err)
	routes := cfg.Routes
	if alg != cfg.Tiers.Algorithm {
		routes = make([]RouteLimit, len(cfg.Routes))
		for i, r := range cfg.Routes {
			r.Limits = r.Limits.withAlgorithm(alg)
			routes[i] = r
		}
	}
	shadow := cfg.Shadow
	if v.Shadow != "" {
		s, err := parseShadowVar("stage variable "+StageVarShadow, v.Shadow, tiers, plans, routes)
		if err != nil {
			report(fmt.Errorf("%w (on this stage: the environment's RATE_LIMIT_SHADOW is used)", err))
		} else {
			shadow = s
		}
	}
	concurrency, err := stageConcurrency(v.Concurrency, cfg.Concurrency)
	report(err)
	limits := &Limits{Tiers: tiers, Plans: plans, Routes: routes, Costs: cfg.Costs, Shadow: shadow, IPv6Prefix: prefix, Quota: quotaLimit, Concurrency: concurrency,
		Networks: cfg.Networks, FailClosed: cfg.FailClosed}
	if err := checkCosts(cfg.Costs, tiers, plans, routes); err != nil {
		env := cfg.Limits
		env.IPv6Prefix, env.Shadow, env.Concurrency = prefix, shadow, concurrency
		report(fmt.Errorf("stage variables: limits RATE_LIMIT_COSTS could never pay: %w; the environment's limits are used on this stage", err))
		return &env, errors.Join(errs...)
	}
	return limits, errors.Join(errs...)
}

// stageQuota resolves the quota limit on a stage: the stage variable's
// value v when set and valid ("N/window", in the stage's algorithm alg,
// or "N/window:algorithm"), else the environment's limit env, which keeps
// its own algorithm when it named one and takes alg otherwise.
func stageQuota(v string, env OwnedLimit, alg ratelimit.Algorithm) (OwnedLimit, error) {
	env = LimitList{env}.withAlgorithm(alg)[0]
	return orValue("stage variable "+StageVarQuota, v, env, env.Limit, func(s string) (OwnedLimit, error) { return makeOwnedLimit(QuotaLimitName, s, alg) })
}

// envFitsAlgorithm reports an environment limit that names no algorithm of
// its own and that alg cannot enforce: the bound on count x window depends
// on the algorithm, so a daily quota of 100,000 in the default sliding
// window is no token bucket. A stage's algorithm applies to every such
// limit, so it must fit them all.
func envFitsAlgorithm(cfg *Config, alg ratelimit.Algorithm) error {
	if alg == cfg.Tiers.Algorithm {
		return nil
	}
	lists := ownerLists(cfg.Tiers, cfg.Plans, cfg.Routes)
	if cfg.Quota.Count > 0 {
		lists = append(lists, LimitList{cfg.Quota})
	}
	for _, list := range lists {
		for _, x := range list.withAlgorithm(alg) {
			if err := x.Validate(); err != nil {
				return err
			}
		}
	}
	return nil
}
