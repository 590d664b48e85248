package config

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/slidegate/slidegate/internal/identity"
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

// Limits are the limits that apply on one stage: the tiers and the route
// limits, each in the stage's algorithm unless it names its own.
type Limits struct {
	// Tiers are the per-caller limits of the stage.
	Tiers Tiers
	// Routes are the per-route limits (RATE_LIMIT_ROUTES), checked for the
	// caller's identity alongside its tier.
	Routes []RouteLimit
	// IPv6Prefix is the prefix length an IPv6 anonymous caller is counted
	// per (identity.SourceIdentity).
	IPv6Prefix int
	// Quota is the limit of GET /v1/quota per caller (RATE_LIMIT_QUOTA,
	// rateLimitQuota).
	Quota ratelimit.Limit
}

// StageValues are the values of the stage variables a Limits is built
// from, trimmed; an empty value keeps the environment's.
type StageValues struct {
	Anonymous, User, Org, Algorithm, IPv6Prefix, Quota string
}

// StageCache resolves stage variables over the environment's limits. Each
// distinct set of values is parsed once and cached (bad values are
// reported once, when first seen); the cache is bounded, and safe for
// concurrent use.
type StageCache struct {
	base *Config
	// report receives the parse errors of a newly seen set of values.
	report func(error)

	mu      sync.Mutex
	entries map[StageValues]*Limits
	env     *Limits
}

// NewStageCache returns a cache over cfg's environment limits; report
// (which may be nil) is called with the errors of each newly parsed set of
// stage variables.
func NewStageCache(cfg *Config, report func(error)) *StageCache {
	if report == nil {
		report = func(error) {}
	}
	return &StageCache{
		base:    cfg,
		report:  report,
		entries: make(map[StageValues]*Limits),
		env:     &Limits{Tiers: cfg.Tiers, Routes: cfg.Routes, IPv6Prefix: cfg.IPv6Prefix, Quota: cfg.Quota},
	}
}

// For returns the limits of a stage with the given stage variables. The
// result is shared: callers must not modify it.
func (c *StageCache) For(stageVars map[string]string) *Limits {
	key := StageValues{
		Anonymous:  strings.TrimSpace(stageVars[StageVarAnonymous]),
		User:       strings.TrimSpace(stageVars[StageVarUser]),
		Org:        strings.TrimSpace(stageVars[StageVarOrg]),
		Algorithm:  strings.TrimSpace(stageVars[StageVarAlgorithm]),
		IPv6Prefix: strings.TrimSpace(stageVars[StageVarIPv6Prefix]),
		Quota:      strings.TrimSpace(stageVars[StageVarQuota]),
	}
	if key == (StageValues{}) {
		return c.env
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
	if len(c.entries) >= maxStageEntries {
		clear(c.entries)
	}
	c.entries[key] = l
	return l
}

// ResolveStage parses stage variable values over cfg's environment limits.
// An empty value keeps the environment's; a bad one is reported and the
// environment's used. The returned Limits is always usable.
func ResolveStage(cfg *Config, v StageValues) (*Limits, error) {
	var errs []error
	prefix, err := parseIPv6Prefix("stage variable "+StageVarIPv6Prefix, v.IPv6Prefix, cfg.IPv6Prefix)
	if err != nil {
		errs = append(errs, err)
	}
	alg, err := parseAlgorithm("stage variable "+StageVarAlgorithm, v.Algorithm, cfg.Tiers.Algorithm)
	if err != nil {
		errs = append(errs, err)
	}
	tiers := Tiers{Algorithm: alg}
	own := cfg.Tiers.OwnAlgorithm
	tiers.Anonymous, tiers.OwnAlgorithm.Anonymous, err = stageLimit(StageVarAnonymous, identity.TierAnonymous, v.Anonymous, cfg.Tiers.Anonymous, own.Anonymous, alg)
	if err != nil {
		errs = append(errs, err)
	}
	tiers.User, tiers.OwnAlgorithm.User, err = stageLimit(StageVarUser, identity.TierUser, v.User, cfg.Tiers.User, own.User, alg)
	if err != nil {
		errs = append(errs, err)
	}
	tiers.Org, tiers.OwnAlgorithm.Org, err = stageLimit(StageVarOrg, identity.TierOrg, v.Org, cfg.Tiers.Org, own.Org, alg)
	if err != nil {
		errs = append(errs, err)
	}
	quotaLimit, _, err := stageLimit(StageVarQuota, QuotaLimitName, v.Quota, cfg.Quota, cfg.QuotaOwnAlgorithm, alg)
	if err != nil {
		errs = append(errs, err)
	}
	routes := cfg.Routes
	if alg != cfg.Tiers.Algorithm {
		routes = make([]RouteLimit, len(cfg.Routes))
		for i, r := range cfg.Routes {
			if !r.OwnAlgorithm {
				r.Limit.Algorithm = alg
			}
			routes[i] = r
		}
	}
	return &Limits{Tiers: tiers, Routes: routes, IPv6Prefix: prefix, Quota: quotaLimit}, errors.Join(errs...)
}

// stageLimit resolves one tier on a stage: the stage variable's value v
// when set and valid ("N/window", in the stage's algorithm alg, or
// "N/window:algorithm"), else the environment's limit env, which keeps its
// own algorithm when it named one (envOwn) and takes alg otherwise.
func stageLimit(variable, tier, v string, env ratelimit.Limit, envOwn bool, alg ratelimit.Algorithm) (ratelimit.Limit, bool, error) {
	if !envOwn {
		env.Algorithm = alg
	}
	if v == "" {
		return env, envOwn, nil
	}
	l, own, err := makeLimitSpec(tier, v, alg)
	if err != nil {
		return env, envOwn, fmt.Errorf("stage variable %s=%q: %w; using %s", variable, clip(v), err, env)
	}
	return l, own, nil
}
