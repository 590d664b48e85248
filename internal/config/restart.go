package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// RestartWarnings names the limits whose counts would start afresh where
// the functions move from the limits from to the limits to (the
// environment's limits and a stage's, or two configurations): a limit's
// Redis key names its algorithm and window but not its count (see
// pkg/ratelimit), so a count changed keeps every caller's counts, and a
// window or algorithm changed does not. Every limit of an owner (tier,
// plan, route, quota) present in both whose name, window and algorithm no
// limit of that owner in to has is named (a list's limits are named after
// their windows, so a list's changed window shows as a new name).
func RestartWarnings(from, to *Limits) []string {
	a, b := limitsByOwner(from), limitsByOwner(to)
	var out []string
	for _, owner := range slices.Sorted(maps.Keys(a)) {
		next, ok := b[owner]
		if !ok {
			continue
		}
		for _, l := range a[owner] {
			// The limit of next that counts on l's keys: the same name,
			// window and algorithm.
			if !slices.ContainsFunc(next, func(m ratelimit.Limit) bool {
				return m.Name == l.Name && m.Window == l.Window && algorithmOf(m) == algorithmOf(l)
			}) {
				out = append(out, fmt.Sprintf("limit %q (%s %s) has no limit of the same name, window and algorithm in the stage's configuration (%s): its callers' counts start afresh (a changed count keeps them, a changed window or algorithm does not)",
					l.Name, l, algorithmOf(l), describe(next)))
			}
		}
	}
	return out
}

func describe(list []ratelimit.Limit) string {
	parts := make([]string, len(list))
	for i, l := range list {
		parts[i] = fmt.Sprintf("%s %s", l, algorithmOf(l))
	}
	return strings.Join(parts, ", ")
}

// limitsByOwner lists every limit of l by its owner's name.
func limitsByOwner(l *Limits) map[string][]ratelimit.Limit {
	out := map[string][]ratelimit.Limit{
		"tier anonymous": l.Tiers.Anonymous.Limits(),
		"tier user":      l.Tiers.User.Limits(),
		"tier org":       l.Tiers.Org.Limits(),
		"quota":          {l.Quota.Limit},
	}
	for name, p := range l.Plans {
		out["plan "+name] = p.Limits()
	}
	for _, r := range l.Routes {
		out["route "+r.Name()] = r.Limits.Limits()
	}
	return out
}

// algorithmOf is a limit's algorithm, the default's name when unset.
func algorithmOf(l ratelimit.Limit) ratelimit.Algorithm {
	if l.Algorithm == "" {
		return ratelimit.SlidingWindow
	}
	return l.Algorithm
}
