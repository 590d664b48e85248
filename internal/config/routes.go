package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// PathGlob matches request paths segment by segment. Globs are split on
// '/' and empty segments are dropped; paths are read as they are served
// (policy.Path: percent-decoded, dot segments resolved, empty segments
// dropped, so "/auth//login/" and "/%61uth/./login" are "/auth/login").
// Write globs decoded. The rules:
//
//   - a literal segment matches itself exactly (paths are case-sensitive, as
//     in API Gateway);
//   - "*" matches exactly one non-empty segment, except as the LAST segment
//     of the glob, where it matches one or more segments (the rest of the
//     path): "/auth/*" matches "/auth/login" and "/auth/oauth/callback" but
//     not "/auth";
//   - "**" as the last segment matches zero or more segments: "/auth/**"
//     matches "/auth" too;
//   - "**" anywhere else, or a segment mixing '*' with other characters,
//     is an error.
//
// A glob must start with '/'. "/**" matches every path, "/*" every path
// but "/".
type PathGlob struct {
	// Text is the glob as written.
	Text     string
	segments []string
}

// ParsePathGlob parses one path glob.
func ParsePathGlob(s string) (PathGlob, error) {
	if !strings.HasPrefix(s, "/") {
		return PathGlob{}, fmt.Errorf("path glob %q: must start with /", truncate.Text(s, truncate.QuotedLen))
	}
	if len(s) > 1024 {
		return PathGlob{}, fmt.Errorf("path glob %q: longer than 1024 bytes", truncate.Text(s, truncate.QuotedLen))
	}
	segs := splitPath(s)
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case seg == "*":
		case seg == "**":
			if !last {
				return PathGlob{}, fmt.Errorf("path glob %q: ** is only allowed as the last segment", truncate.Text(s, truncate.QuotedLen))
			}
		case strings.Contains(seg, "*"):
			return PathGlob{}, fmt.Errorf("path glob %q: * must be a whole segment", truncate.Text(s, truncate.QuotedLen))
		case strings.ContainsAny(seg, " \t\r\n,="):
			return PathGlob{}, fmt.Errorf("path glob %q: spaces, commas and '=' are not allowed", truncate.Text(s, truncate.QuotedLen))
		}
	}
	return PathGlob{Text: s, segments: segs}, nil
}

// Same reports whether two globs match the same paths: the same segments,
// however written ("/v1//items/" is "/v1/items").
func (g PathGlob) Same(h PathGlob) bool { return slices.Equal(g.segments, h.segments) }

// MatchSegments reports whether the glob matches a path read as segments
// (decoded, dot segments resolved, empty ones dropped: policy.Path's
// readings). No segments is "/".
func (g PathGlob) MatchSegments(path []string) bool {
	return matchSegments(g.segments, path)
}

func matchSegments(glob, path []string) bool {
	for i, seg := range glob {
		last := i == len(glob)-1
		if last && seg == "**" {
			return true
		}
		if i >= len(path) {
			return false
		}
		if last && seg == "*" {
			return true // path[i] exists and is non-empty: one or more segments
		}
		if seg != "*" && seg != path[i] {
			return false
		}
	}
	return len(path) == len(glob)
}

// splitPath splits a glob into its non-empty segments: "/a//b/" is
// ["a", "b"] and "/" is none.
func splitPath(p string) []string {
	segs := strings.Split(p, "/")
	out := segs[:0]
	for _, s := range segs {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Route is the requests of one method and path glob: what a route
// limit, a cost and a route's in-flight limit apply to.
type Route struct {
	// Method is the HTTP method in upper case, or "*" (also written ANY)
	// for every method; a route on GET also holds HEAD (MethodMatches).
	Method string
	// Path is the path glob.
	Path PathGlob
}

// Name is the route's name, "METHOD /glob", as RATE_LIMIT_SHADOW names it:
// the policy name of its limits.
func (r Route) Name() string { return r.Method + " " + r.Path.Text }

// RouteLimit is an extra limit list on the requests of one route, counted
// per caller (the same identity as the caller's tier or plan). Limits of
// a request that share an algorithm are decided by one script call.
type RouteLimit struct {
	Route
	// Limits are the budgets. A list of one limit is named "METHOD /glob",
	// e.g. "POST /auth/*", the policy name of the RateLimit headers; the
	// limits of a longer list are named "POST /auth/*-1m" and so on (see
	// LimitList).
	Limits LimitList
}

// MethodMatches reports whether a route's method (upper case, or "*")
// holds a request's (compared as written: callers upper-case it once). A
// route on GET also holds HEAD, which Go's http.ServeMux (like most
// routers) answers with the GET handler; a route on HEAD holds HEAD only.
func MethodMatches(route, method string) bool {
	return route == "*" || route == method || (route == "GET" && method == "HEAD")
}

// ParseRoutes parses RATE_LIMIT_ROUTES: comma-separated entries
// "METHOD /path-glob=limit-list", such as
// "POST /auth/*=5/1m:sliding-log,GET /search=100/1m". The limit list is
// one limit "N/window[:algorithm]" or several separated by commas: a
// comma-separated item without '=' belongs to the entry before it, so
// "POST /auth/*=5/1m,100/1d,GET /search=100/1m" gives POST /auth/* two
// limits. The method may be "*" or "ANY". The empty string and "none" mean
// no route limits. A limit without its own algorithm gets alg.
//
// The same method and glob given twice is refused (an error wrapping
// ErrDuplicateEntry, naming the entry): two copies of one limit are two
// checks on one key, which pkg/ratelimit refuses (ErrInvalid). The routes
// are then still returned, each limit once: a limit of the later entry
// that the earlier one already has is dropped, its other limits kept, so
// that refusing the value loosens nothing the operator wrote.
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
			r.Limits = slices.DeleteFunc(r.Limits, func(l OwnedLimit) bool { return routes[i].Limits.has(l.Limit) })
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

// has reports whether the list holds a limit equal to l (the same key for
// one identity: name, algorithm, count and window).
func (l LimitList) has(x ratelimit.Limit) bool {
	for _, y := range l {
		if y.Limit == x {
			return true
		}
	}
	return false
}

func parseRouteLimit(entry string, alg ratelimit.Algorithm) (RouteLimit, error) {
	route, spec, err := parseRouteEntry(entry)
	if err != nil {
		return RouteLimit{}, fmt.Errorf("route limit %q: %w", truncate.Text(entry, truncate.QuotedLen), err)
	}
	limits, err := ParseLimitList(route.Name(), spec, alg)
	if err != nil {
		return RouteLimit{}, fmt.Errorf("route limit %q: %w", truncate.Text(entry, truncate.QuotedLen), err)
	}
	return RouteLimit{Route: route, Limits: limits}, nil
}

// parseRouteEntry splits "METHOD /path-glob=value" into its route and
// value.
func parseRouteEntry(entry string) (Route, string, error) {
	name, value, ok := strings.Cut(entry, "=")
	if !ok {
		return Route{}, "", errors.New("want METHOD /path-glob=value")
	}
	route, err := parseRoute(name)
	return route, value, err
}

// parseRoute parses "METHOD /path-glob" (the method upper-cased, "*" for
// ANY), or "METHOD:/path-glob" where a stage variable's value allows no
// spaces.
func parseRoute(name string) (Route, error) {
	name = strings.TrimSpace(name)
	if method, path, ok := strings.Cut(name, ":/"); ok && !strings.Contains(method, " ") {
		name = method + " /" + path
	}
	method, path, ok := strings.Cut(name, " ")
	if !ok {
		return Route{}, errors.New("want METHOD /path-glob")
	}
	method = strings.ToUpper(strings.TrimSpace(method))
	if method == "ANY" {
		method = "*"
	}
	if method != "*" && !isToken(method) {
		return Route{}, fmt.Errorf("method %q is not an HTTP method", truncate.Text(method, truncate.QuotedLen))
	}
	glob, err := ParsePathGlob(strings.TrimSpace(path))
	if err != nil {
		return Route{}, err
	}
	return Route{Method: method, Path: glob}, nil
}

func isToken(s string) bool {
	if s == "" || len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// ParseFailClosed parses RATE_LIMIT_FAIL_CLOSED: comma-separated path
// globs. The empty string and "none" mean no fail-closed route.
func ParseFailClosed(s string) ([]PathGlob, error) {
	var globs []PathGlob
	for _, part := range listItems(s) {
		g, err := ParsePathGlob(part)
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
func parseFailClosedVar(v string) ([]PathGlob, error) {
	return orDefault("RATE_LIMIT_FAIL_CLOSED", v, DefaultFailClosed, strconv.Quote(DefaultFailClosed), ParseFailClosed)
}
