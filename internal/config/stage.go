package config

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Stage variable names that override the environment per request.
const (
	StageVarAnonymous = "rateLimitAnonymous"
	StageVarUser      = "rateLimitUser"
	StageVarOrg       = "rateLimitOrg"
	StageVarAlgorithm = "rateLimitAlgorithm"
	StageVarQuota     = "rateLimitQuota"
)

// maxStageEntries bounds the stage cache. A REST API has a handful of
// stages; the bound only matters if stage variables were somehow
// attacker-controlled (they are not: they come from the deployment).
const maxStageEntries = 64

// Limits are the limits that apply on one stage: the tiers and the route
// limits, all in the stage's algorithm.
type Limits struct {
	// Tiers are the per-caller limits of the stage.
	Tiers Tiers
	// Routes are the per-route limits (RATE_LIMIT_ROUTES), checked for the
	// caller's identity alongside its tier.
	Routes []RouteLimit
	// Quota is the limit of GET /v1/quota per caller (RATE_LIMIT_QUOTA,
	// rateLimitQuota).
	Quota ratelimit.Limit
}

// stageKey is the set of stage variable values a Limits was built from.
type stageKey struct {
	anonymous, user, org, algorithm, quota string
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
	entries map[stageKey]*Limits
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
		entries: make(map[stageKey]*Limits),
		env:     &Limits{Tiers: cfg.Tiers, Routes: cfg.Routes, Quota: cfg.Quota},
	}
}

// For returns the limits of a stage with the given stage variables. The
// result is shared: callers must not modify it.
func (c *StageCache) For(stageVars map[string]string) *Limits {
	key := stageKey{
		anonymous: strings.TrimSpace(stageVars[StageVarAnonymous]),
		user:      strings.TrimSpace(stageVars[StageVarUser]),
		org:       strings.TrimSpace(stageVars[StageVarOrg]),
		algorithm: strings.TrimSpace(stageVars[StageVarAlgorithm]),
		quota:     strings.TrimSpace(stageVars[StageVarQuota]),
	}
	if key == (stageKey{}) {
		return c.env
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.entries[key]; ok {
		return l
	}
	l, err := ResolveStage(c.base, key.anonymous, key.user, key.org, key.algorithm, key.quota)
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
func ResolveStage(cfg *Config, anonymous, user, org, algorithm, quota string) (*Limits, error) {
	var errs []error
	alg, err := parseAlgorithm("stage variable "+StageVarAlgorithm, algorithm, cfg.Tiers.Algorithm)
	if err != nil {
		errs = append(errs, err)
	}
	tiers := Tiers{Algorithm: alg}
	tiers.Anonymous, err = stageLimit(StageVarAnonymous, TierAnonymous, anonymous, cfg.Tiers.Anonymous, alg)
	if err != nil {
		errs = append(errs, err)
	}
	tiers.User, err = stageLimit(StageVarUser, TierUser, user, cfg.Tiers.User, alg)
	if err != nil {
		errs = append(errs, err)
	}
	tiers.Org, err = stageLimit(StageVarOrg, TierOrg, org, cfg.Tiers.Org, alg)
	if err != nil {
		errs = append(errs, err)
	}
	quotaLimit, err := stageLimit(StageVarQuota, QuotaLimitName, quota, cfg.Quota, alg)
	if err != nil {
		errs = append(errs, err)
	}
	routes := cfg.Routes
	if alg != cfg.Tiers.Algorithm {
		routes = make([]RouteLimit, len(cfg.Routes))
		for i, r := range cfg.Routes {
			r.Limit.Algorithm = alg
			routes[i] = r
		}
	}
	return &Limits{Tiers: tiers, Routes: routes, Quota: quotaLimit}, errors.Join(errs...)
}

func stageLimit(variable, tier, v string, env ratelimit.Limit, alg ratelimit.Algorithm) (ratelimit.Limit, error) {
	env.Algorithm = alg
	if v == "" {
		return env, nil
	}
	l, err := makeLimit(tier, v, alg)
	if err != nil {
		return env, fmt.Errorf("stage variable %s=%q: %w; using %s", variable, clip(v), err, env)
	}
	return l, nil
}
