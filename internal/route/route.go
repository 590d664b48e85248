// Package route says which configured route a request falls under: a
// route is a method and a path glob (Route, PathGlob), and a request path
// is read in every spelling a router may serve it (Path) before a glob is
// matched against it. It parses routes and globs as the configuration
// writes them and knows nothing of limits.
package route

import (
	"errors"
	"fmt"
	"strings"

	"github.com/slidegate/slidegate/internal/truncate"
)

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

// MethodMatches reports whether a route's method (upper case, or "*")
// holds a request's (compared as written: callers upper-case it once). A
// route on GET also holds HEAD, which Go's http.ServeMux (like most
// routers) answers with the GET handler; a route on HEAD holds HEAD only.
func MethodMatches(route, method string) bool {
	return route == "*" || route == method || (route == "GET" && method == "HEAD")
}

// Parse parses "METHOD /path-glob" (the method upper-cased, "*" for
// ANY), or "METHOD:/path-glob" where a stage variable's value allows no
// spaces.
func Parse(name string) (Route, error) {
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

// Overlap reports whether some request is held by both routes (two
// cost entries, or a cost entry and a route limit).
func Overlap(a, b Route) bool {
	return methodsOverlap(a.Method, b.Method) && globsOverlap(a.Path.segments, b.Path.segments)
}

// methodsOverlap reports whether some request method is held by both a
// cost's method and a route limit's (see MethodMatches).
func methodsOverlap(a, b string) bool {
	return a == "*" || b == "*" || a == b || (a == "GET" && b == "HEAD") || (a == "HEAD" && b == "GET")
}

// globsOverlap reports whether some path matches both globs (segment
// lists as ParsePathGlob keeps them; see PathGlob for the rules).
func globsOverlap(a, b []string) bool {
	switch {
	case len(a) == 1 && a[0] == "**", len(b) == 1 && b[0] == "**":
		// Zero or more segments: the other glob matches some path.
		return true
	case len(a) == 1 && a[0] == "*":
		// The rest of the path, one segment or more.
		return len(b) > 0
	case len(b) == 1 && b[0] == "*":
		return len(a) > 0
	case len(a) == 0 || len(b) == 0:
		return len(a) == len(b)
	}
	if a[0] != "*" && b[0] != "*" && a[0] != b[0] {
		return false
	}
	return globsOverlap(a[1:], b[1:])
}
