package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/slidegate/slidegate/internal/clip"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// PathGlob matches request paths segment by segment. Globs are split on
// '/' and empty segments are dropped; paths are read as they are served
// (RequestPath: percent-decoded, dot segments resolved, empty segments
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
		return PathGlob{}, fmt.Errorf("path glob %q: must start with /", clip.Text(s, clip.QuotedLen))
	}
	if len(s) > 1024 {
		return PathGlob{}, fmt.Errorf("path glob %q: longer than 1024 bytes", clip.Text(s, clip.QuotedLen))
	}
	segs := splitPath(s)
	for i, seg := range segs {
		last := i == len(segs)-1
		switch {
		case seg == "*":
		case seg == "**":
			if !last {
				return PathGlob{}, fmt.Errorf("path glob %q: ** is only allowed as the last segment", clip.Text(s, clip.QuotedLen))
			}
		case strings.Contains(seg, "*"):
			return PathGlob{}, fmt.Errorf("path glob %q: * must be a whole segment", clip.Text(s, clip.QuotedLen))
		case strings.ContainsAny(seg, " \t\r\n,="):
			return PathGlob{}, fmt.Errorf("path glob %q: spaces, commas and '=' are not allowed", clip.Text(s, clip.QuotedLen))
		}
	}
	return PathGlob{Text: s, segments: segs}, nil
}

// Match reports whether path, as received (see ParseRequestPath), matches
// the glob.
func (g PathGlob) Match(path string) bool {
	return g.MatchRequest(ParseRequestPath(path))
}

// MatchRequest reports whether the glob matches any reading of p.
func (g PathGlob) MatchRequest(p RequestPath) bool {
	for _, r := range p.readings {
		if matchSegments(g.segments, r) {
			return true
		}
	}
	// The zero RequestPath is "/".
	return len(p.readings) == 0 && matchSegments(g.segments, nil)
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

// RouteLimit is an extra limit list on the requests of one method and
// path glob, counted per caller (the same identity as the caller's tier or
// plan). Limits of a request that share an algorithm are decided by one
// script call.
type RouteLimit struct {
	// Method is the HTTP method in upper case, or "*" (also written ANY)
	// for every method.
	Method string
	// Path is the path glob.
	Path PathGlob
	// Limits are the budgets. A list of one limit is named "METHOD /glob",
	// e.g. "POST /auth/*", the policy name of the RateLimit headers; the
	// limits of a longer list are named "POST /auth/*-1m" and so on (see
	// LimitList).
	Limits LimitList
}

// Name is the route's name, "METHOD /glob", as RATE_LIMIT_SHADOW names it.
func (r RouteLimit) Name() string { return r.Method + " " + r.Path.Text }

// Matches reports whether the route limit applies to a request; path is
// as received (see ParseRequestPath).
func (r RouteLimit) Matches(method, path string) bool {
	return r.MatchesRequest(method, ParseRequestPath(path))
}

// MatchesRequest reports whether the route limit applies to a request of
// method (compared as written: callers upper-case it once) and path. A
// limit on GET also holds HEAD, which Go's http.ServeMux (like most
// routers) answers with the GET handler; a limit on HEAD holds HEAD only.
func (r RouteLimit) MatchesRequest(method string, path RequestPath) bool {
	return methodMatches(r.Method, method) && r.Path.MatchRequest(path)
}

// methodMatches reports whether a route's method (upper case, or "*")
// holds a request's.
func methodMatches(route, method string) bool {
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
func ParseRoutes(s string, alg ratelimit.Algorithm) ([]RouteLimit, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, None) {
		return nil, nil
	}
	var routes []RouteLimit
	for _, entry := range splitEntries(s, "") {
		r, err := parseRoute(entry, alg)
		if err != nil {
			return nil, err
		}
		routes = append(routes, r)
	}
	if len(routes) > 64 {
		return nil, errors.New("more than 64 route limits")
	}
	return routes, nil
}

func parseRoute(entry string, alg ratelimit.Algorithm) (RouteLimit, error) {
	method, glob, spec, err := parseRouteEntry(entry)
	if err != nil {
		return RouteLimit{}, fmt.Errorf("route limit %q: %w", clip.Text(entry, clip.QuotedLen), err)
	}
	limits, err := ParseLimitList(method+" "+glob.Text, spec, alg)
	if err != nil {
		return RouteLimit{}, fmt.Errorf("route limit %q: %w", clip.Text(entry, clip.QuotedLen), err)
	}
	return RouteLimit{Method: method, Path: glob, Limits: limits}, nil
}

// parseRouteEntry splits "METHOD /path-glob=value" into its method (upper
// case, "*" for ANY), glob and value.
func parseRouteEntry(entry string) (method string, glob PathGlob, value string, err error) {
	route, value, ok := strings.Cut(entry, "=")
	if !ok {
		return "", PathGlob{}, "", errors.New("want METHOD /path-glob=value")
	}
	method, glob, err = parseRouteName(route)
	return method, glob, value, err
}

// parseRouteName parses "METHOD /path-glob".
func parseRouteName(route string) (string, PathGlob, error) {
	method, path, ok := strings.Cut(strings.TrimSpace(route), " ")
	if !ok {
		return "", PathGlob{}, errors.New("want METHOD /path-glob")
	}
	method = strings.ToUpper(strings.TrimSpace(method))
	if method == "ANY" {
		method = "*"
	}
	if method != "*" && !isToken(method) {
		return "", PathGlob{}, fmt.Errorf("method %q is not an HTTP method", clip.Text(method, clip.QuotedLen))
	}
	glob, err := ParsePathGlob(strings.TrimSpace(path))
	if err != nil {
		return "", PathGlob{}, err
	}
	return method, glob, nil
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
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, None) {
		return nil, nil
	}
	var globs []PathGlob
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
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
	if v == "" {
		v = DefaultRoutes
	}
	routes, err := ParseRoutes(v, alg)
	if err != nil {
		def, derr := ParseRoutes(DefaultRoutes, alg)
		if derr != nil {
			panic(fmt.Sprintf("config: default RATE_LIMIT_ROUTES: %v", derr))
		}
		return def, fmt.Errorf("RATE_LIMIT_ROUTES=%q: %w; using %q", clip.Text(v, clip.QuotedLen), err, DefaultRoutes)
	}
	return routes, nil
}

// parseFailClosedVar is parseRoutesVar for RATE_LIMIT_FAIL_CLOSED.
func parseFailClosedVar(v string) ([]PathGlob, error) {
	if v == "" {
		v = DefaultFailClosed
	}
	globs, err := ParseFailClosed(v)
	if err != nil {
		def, derr := ParseFailClosed(DefaultFailClosed)
		if derr != nil {
			panic(fmt.Sprintf("config: default RATE_LIMIT_FAIL_CLOSED: %v", derr))
		}
		return def, fmt.Errorf("RATE_LIMIT_FAIL_CLOSED=%q: %w; using %q", clip.Text(v, clip.QuotedLen), err, DefaultFailClosed)
	}
	return globs, nil
}

// IsFailClosed reports whether path, as received (see ParseRequestPath),
// matches one of the fail-closed globs.
func IsFailClosed(globs []PathGlob, path string) bool {
	return IsFailClosedRequest(globs, ParseRequestPath(path))
}

// IsFailClosedRequest reports whether p matches one of the fail-closed
// globs.
func IsFailClosedRequest(globs []PathGlob, p RequestPath) bool {
	for _, g := range globs {
		if g.MatchRequest(p) {
			return true
		}
	}
	return false
}
