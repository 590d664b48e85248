package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// MaxCosts bounds RATE_LIMIT_COSTS.
const MaxCosts = 64

// RouteCost is how many units a request of one route spends
// (RATE_LIMIT_COSTS).
type RouteCost struct {
	route.Route
	// Cost is the units such a request spends, from 1 to
	// ratelimit.MaxCount.
	Cost int64
}

// ParseCosts parses RATE_LIMIT_COSTS: comma-separated entries
// "METHOD /path-glob=units", such as "POST /v1/reports=10,GET
// /v1/export/*=5". The empty string and "none" mean every request costs
// 1. A request matching several entries costs the highest of them, in any
// order (see internal/policy). The same method and glob given twice is an
// error wrapping ErrDuplicateEntry, naming the entry; the costs are then
// still returned (the highest applies, so the copy loosens nothing).
func ParseCosts(s string) ([]RouteCost, error) {
	var costs []RouteCost
	var dups []error
	for _, entry := range listItems(s) {
		rt, value, err := parseRouteEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("cost %q: %w", truncate.Text(entry, truncate.QuotedLen), err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil || n < 1 || n > ratelimit.MaxCount {
			return nil, fmt.Errorf("cost %q: want a whole number of units from 1 to %d", truncate.Text(entry, truncate.QuotedLen), ratelimit.MaxCount)
		}
		c := RouteCost{Route: rt, Cost: n}
		if slices.ContainsFunc(costs, func(o RouteCost) bool { return o.Method == c.Method && o.Path.Same(c.Path) }) {
			dups = append(dups, fmt.Errorf("cost %q: %w: %s %s is given twice", truncate.Text(entry, truncate.QuotedLen), ErrDuplicateEntry, c.Method, c.Path.Text))
		}
		costs = append(costs, c)
	}
	if len(costs) > MaxCosts {
		return nil, fmt.Errorf("more than %d costs", MaxCosts)
	}
	return costs, errors.Join(dups...)
}

// String renders the entry as RATE_LIMIT_COSTS writes it.
func (c RouteCost) String() string {
	return c.Method + " " + c.Path.Text + "=" + strconv.FormatInt(c.Cost, 10)
}

// checkCosts refuses costs that some request could never pay: a cost
// above the burst (ratelimit.Limit.Burst) of a limit it is spent on. A
// request's cost is spent on every limit the request is checked against:
// every limit of every tier and plan (any of them may be the caller's),
// and the route limits whose requests can match the cost's entry.
func checkCosts(costs []RouteCost, tiers Tiers, plans Plans, routes []RouteLimit) error {
	var errs []error
	for _, c := range costs {
		if c.Cost == 1 {
			continue
		}
		over := func(list LimitList) {
			for _, l := range list {
				if c.Cost > l.Burst() {
					errs = append(errs, fmt.Errorf("cost %s is above limit %s %s (%s admits at most %d units at once): such a request could never pass",
						c, l.Name, l.Limit, l.Algorithm, l.Burst()))
					return
				}
			}
		}
		for _, list := range ownerLists(tiers, plans, nil) {
			over(list)
		}
		for _, r := range routes {
			if route.Overlap(c.Route, r.Route) {
				over(r.Limits)
			}
		}
	}
	return errors.Join(errs...)
}
