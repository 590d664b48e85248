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

// RouteLimit is an extra limit list on the requests of one route, counted
// per caller (the same identity as the caller's tier or plan). Limits of
// a request that share an algorithm are decided by one script call.
type RouteLimit struct {
	route.Route
	// Limits are the budgets. A list of one limit is named "METHOD /glob",
	// e.g. "POST /auth/*", the policy name of the RateLimit headers; the
	// limits of a longer list are named "POST /auth/*-1m" and so on (see
	// LimitList).
	Limits LimitList
}

// ParseRoutes parses RATE_LIMIT_ROUTES: comma-separated entries
// "METHOD /path-glob=limit-list" (docs/contract.md: "Lists inside lists"),
// the method "*" or "ANY" for every method; the empty string and "none"
// mean no route limits. A limit without its own algorithm gets alg.
//
// The same method and glob given twice is an error wrapping
// ErrDuplicateEntry, naming the entry (two copies of one limit are two
// checks on one key, which pkg/ratelimit refuses). The routes are then
// still returned, each limit once: the later entry's limits the earlier
// one has are dropped, the others kept, so that nothing loosens.
func ParseRoutes(s string, alg ratelimit.Algorithm) ([]RouteLimit, error) {
	var routes []RouteLimit
	var dups []error
	for _, entry := range splitEntries(s, "") {
		r, err := parseRouteLimit(entry, alg)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(routes, func(o RouteLimit) bool { return o.Method == r.Method && o.Path.Same(r.Path) }); i >= 0 {
			dups = append(dups, fmt.Errorf("route limit %q: %w: %s is given twice", truncate.Text(entry, truncate.QuotedLen), ErrDuplicateEntry, r.Name()))
			r.Limits = slices.DeleteFunc(r.Limits, func(l OwnedLimit) bool {
				return slices.ContainsFunc(routes[i].Limits, func(o OwnedLimit) bool { return o.Limit == l.Limit })
			})
			if len(r.Limits) == 0 {
				continue
			}
		}
		routes = append(routes, r)
	}
	if len(routes) > 64 {
		return nil, errors.New("more than 64 route limits")
	}
	return routes, errors.Join(dups...)
}

// ErrDuplicateEntry is wrapped by the error of a list that gives one
// entry twice (RATE_LIMIT_ROUTES, RATE_LIMIT_COSTS).
var ErrDuplicateEntry = errors.New("duplicate entry")

func parseRouteLimit(entry string, alg ratelimit.Algorithm) (RouteLimit, error) {
	rt, spec, err := parseRouteEntry(entry)
	var limits LimitList
	if err == nil {
		limits, err = ParseLimitList(rt.Name(), spec, alg)
	}
	if err != nil {
		return RouteLimit{}, fmt.Errorf("route limit %q: %w", truncate.Text(entry, truncate.QuotedLen), err)
	}
	return RouteLimit{Route: rt, Limits: limits}, nil
}

// parseRouteEntry splits "METHOD /path-glob=value" into its route and
// value.
func parseRouteEntry(entry string) (route.Route, string, error) {
	name, value, ok := strings.Cut(entry, "=")
	if !ok {
		return route.Route{}, "", errors.New("want METHOD /path-glob=value")
	}
	rt, err := route.Parse(name)
	return rt, value, err
}

// ParseFailClosed parses RATE_LIMIT_FAIL_CLOSED: comma-separated path
// globs. The empty string and "none" mean no fail-closed route.
func ParseFailClosed(s string) ([]route.PathGlob, error) {
	var globs []route.PathGlob
	for _, part := range listItems(s) {
		g, err := route.ParsePathGlob(part)
		if err != nil {
			return nil, err
		}
		globs = append(globs, g)
	}
	return globs, nil
}

// parseRoutesVar applies the default rules to RATE_LIMIT_ROUTES: unset means
// the default; a value with any bad entry is rejected as a whole (a
// half-applied list would silently drop a limit the operator asked for) and
// the default used.
func parseRoutesVar(v string, alg ratelimit.Algorithm) ([]RouteLimit, error) {
	if routes, err := ParseRoutes(v, alg); err != nil && routes != nil {
		// Duplicates only: each limit kept once (see ParseRoutes).
		return routes, fmt.Errorf("RATE_LIMIT_ROUTES=%q: %w; each limit is kept once", truncate.Text(v, truncate.QuotedLen), err)
	}
	return orDefault("RATE_LIMIT_ROUTES", v, DefaultRoutes, strconv.Quote(DefaultRoutes), func(s string) ([]RouteLimit, error) { return ParseRoutes(s, alg) })
}

// parseFailClosedVar is parseRoutesVar for RATE_LIMIT_FAIL_CLOSED.
func parseFailClosedVar(v string) ([]route.PathGlob, error) {
	return orDefault("RATE_LIMIT_FAIL_CLOSED", v, DefaultFailClosed, strconv.Quote(DefaultFailClosed), ParseFailClosed)
}
