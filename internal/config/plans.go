package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// MaxPlans bounds RATE_LIMIT_PLANS and the plans of one stage.
const MaxPlans = 64

// Plans maps a plan name (identity.NormalizePlan's form: lower case,
// letters, digits and underscores) to its limits.
type Plans map[string]LimitList

// Names returns the plan names, sorted.
func (p Plans) Names() []string { return slices.Sorted(maps.Keys(p)) }

// ownerLists are the limit lists of every tier, every plan (by name) and
// every route, in that order.
func ownerLists(tiers Tiers, plans Plans, routes []RouteLimit) []LimitList {
	lists := []LimitList{tiers.Anonymous, tiers.User, tiers.Org}
	for _, name := range plans.Names() {
		lists = append(lists, plans[name])
	}
	for _, r := range routes {
		lists = append(lists, r.Limits)
	}
	return lists
}

// listItems splits a comma-separated list into its items, trimmed, empty
// ones left out; the empty string and None are none.
func listItems(s string) []string {
	var items []string
	if s = strings.TrimSpace(s); s != "" && !strings.EqualFold(s, None) {
		for _, item := range strings.Split(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
	}
	return items
}

// splitEntries splits a list of "key=value" entries whose values may
// themselves be comma-separated lists: entries are separated by commas (or
// by any of extraSeps), and an item without '=' continues the value of the
// entry before it. "free=20/1s,600/1m,pro=100/1s" is the two entries
// "free=20/1s,600/1m" and "pro=100/1s". An item without '=' at the start
// is returned as an entry of its own, for the caller to refuse. The empty
// string and None are no entries.
func splitEntries(s, extraSeps string) []string {
	if s = strings.TrimSpace(s); s == "" || strings.EqualFold(s, None) {
		return nil
	}
	chunks := []string{s}
	if extraSeps != "" {
		chunks = strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(extraSeps, r) })
	}
	var entries []string
	for _, chunk := range chunks {
		first := true // the first item after a separator of extraSeps starts an entry
		for _, item := range strings.Split(chunk, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if first || strings.Contains(item, "=") {
				entries = append(entries, item)
			} else {
				entries[len(entries)-1] += "," + item
			}
			first = false
		}
	}
	return entries
}

// ParsePlans parses RATE_LIMIT_PLANS: entries "name=limit-list", separated
// by ';' or ',' (docs/contract.md: "Lists inside lists"), such as
// "free=20/1s,600/1m;pro=100/1s,6000/1m,100000/1d", plan names as planName
// takes them; the empty string and "none" mean no plans. A bad entry is
// reported and that whole plan left out (its callers get their tier's
// limits); the other plans stand.
func ParsePlans(s string, alg ratelimit.Algorithm) (Plans, error) {
	plans := make(Plans)
	var errs []error
	for _, entry := range splitEntries(s, ";") {
		name, list, err := parsePlanEntry(entry, alg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := plans[name]; dup {
			errs = append(errs, fmt.Errorf("plan %q: given twice; the first is used", name))
			continue
		}
		if len(plans) >= MaxPlans {
			errs = append(errs, fmt.Errorf("more than %d plans; plan %q and the rest are left out", MaxPlans, name))
			break
		}
		plans[name] = list
	}
	return plans, errors.Join(errs...)
}

// parsePlanEntry parses one "name=limit-list".
func parsePlanEntry(entry string, alg ratelimit.Algorithm) (string, LimitList, error) {
	rawName, spec, ok := strings.Cut(entry, "=")
	if !ok {
		return "", nil, fmt.Errorf("plan entry %q: want name=N/window[:algorithm],...; left out", truncate.Text(entry, truncate.QuotedLen))
	}
	name, err := planName(rawName)
	if err != nil {
		return "", nil, fmt.Errorf("plan entry %q: %w; left out", truncate.Text(entry, truncate.QuotedLen), err)
	}
	list, err := ParseLimitList(name, spec, alg)
	if err != nil {
		return "", nil, fmt.Errorf("plan %q=%q: %w; left out, its callers get their tier's limits", name, truncate.Text(spec, truncate.QuotedLen), err)
	}
	return name, list, nil
}

// planName normalizes a configured plan name, refusing the reserved ones.
func planName(raw string) (string, error) {
	name, ok := identity.NormalizePlan(raw)
	if !ok {
		return "", fmt.Errorf("plan name %q: want 1 to %d letters, digits and underscores", truncate.Text(strings.TrimSpace(raw), truncate.QuotedLen), identity.MaxPlanLen)
	}
	switch name {
	case network.Unlimited, network.Blocked:
		return "", fmt.Errorf("plan name %q is reserved for RATE_LIMIT_NETWORKS", name)
	case identity.TierAnonymous, identity.TierUser, identity.TierOrg, QuotaLimitName:
		// A plan's limits are named after it: the same name as a tier's
		// would share its Redis keys and its shadow-list entry.
		return "", fmt.Errorf("plan name %q is a tier's or the quota's name", name)
	}
	return name, nil
}

// StageVarPlanPrefix starts the stage variable of a plan, named in the
// scheme of the tiers' (rateLimitAnonymous): rateLimitPlanPro holds the
// limit list of plan pro on the stage; rateLimitPlan_pro is read the same
// (plan names are case-insensitive). A plan not in RATE_LIMIT_PLANS may be
// defined this way too.
const StageVarPlanPrefix = "rateLimitPlan"

// stageVarPlan is the plan name a stage variable is for, as written
// (rateLimitPlanPro: "Pro"), and false for any other variable.
func stageVarPlan(variable string) (string, bool) {
	rest, ok := strings.CutPrefix(variable, StageVarPlanPrefix)
	rest = strings.TrimPrefix(rest, "_")
	return rest, ok && rest != ""
}

// stagePlansKey collects the plan stage variables into one comparable
// string (sorted "variable=value" lines), the cache key of their parse.
func stagePlansKey(stageVars map[string]string) string {
	var lines []string
	for k, v := range stageVars {
		if _, ok := stageVarPlan(k); ok {
			if v = strings.TrimSpace(v); v != "" {
				lines = append(lines, k+"="+v)
			}
		}
	}
	if len(lines) == 0 {
		return ""
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// stagePlans resolves the plans on a stage: the environment's, each in
// the stage's algorithm, with the plan stage variables (key, as
// stagePlansKey builds it) replacing or adding plans. A bad stage value
// is reported and the environment's plan (or none) used.
func stagePlans(env Plans, key string, alg ratelimit.Algorithm) (Plans, error) {
	plans := make(Plans, len(env))
	for name, list := range env {
		plans[name] = list.withAlgorithm(alg)
	}
	if key == "" {
		return plans, nil
	}
	var errs []error
	onStage := make(map[string]string)
	for _, line := range strings.Split(key, "\n") {
		variable, v, _ := strings.Cut(line, "=")
		rawName, _ := stageVarPlan(variable)
		name, err := planName(rawName)
		if err != nil {
			errs = append(errs, fmt.Errorf("stage variable %s: %w; ignored", variable, err))
			continue
		}
		if other, dup := onStage[name]; dup {
			errs = append(errs, fmt.Errorf("stage variable %s: plan %s is given by %s too; %s is used", variable, name, other, other))
			continue
		}
		onStage[name] = variable
		if _, known := env[name]; !known && len(plans) >= MaxPlans {
			errs = append(errs, fmt.Errorf("stage variable %s: more than %d plans; ignored", variable, MaxPlans))
			continue
		}
		list, err := stageList(variable, name, v, env[name], alg)
		if err != nil {
			errs = append(errs, err)
		}
		if len(list) > 0 {
			plans[name] = list
		}
	}
	return plans, errors.Join(errs...)
}
