package apigw

import (
	"net/url"
	"strings"
)

// LimitPath is the path a REST API request's route limits and fail-closed
// globs are matched against: the API Gateway resource it was routed to
// ("/auth/login", "/items/{id}") when it names one, else the request path.
//
// The resource is what the API was built with, whatever the caller's URL
// looked like: behind a custom domain with a base-path mapping the request
// path carries the base path ("/api/auth/login") and would slip past
// "/auth/*", the resource does not. A greedy resource ("/{proxy+}") says
// nothing about the route, so the path is used then, as received (the
// matching decodes it as the serving router does: policy.Path). A
// glob's "*" matches a "{param}" segment like any other. A resource with
// a parameter ("/{section}/{action}") is matched too, but says too little
// alone: see ServedPath.
func LimitPath(resource, path string) string {
	if resource == "" || !strings.HasPrefix(resource, "/") || strings.Contains(resource, "+}") {
		return path
	}
	return resource
}

// ServedPaths are the other paths that route limits and fail-closed globs
// must match for a REST request routed to resource with the path
// parameters params (the event's pathParameters, decoded), besides
// LimitPath; a glob that matches any of them holds the request
// (Request.ServedPaths). They are:
//
//   - the request path, when LimitPath chose a resource with a parameter:
//     behind "/{section}/{action}", "/auth/login" is served as the login
//     while the resource matches no "/auth/*" glob;
//   - the resource with its parameters filled in, escaped, when the
//     resource has any and params names them all: "/{proxy+}" with proxy
//     "auth/login" is "/auth/login". Behind a custom domain's base-path
//     mapping the request path carries the base path ("/v2/auth/login")
//     while an integration's {proxy} does not: the backend serves the
//     login that the path alone would not show to "/auth/*".
//
// None when LimitPath alone decides.
func ServedPaths(resource, path string, params map[string]string) []string {
	limit := LimitPath(resource, path)
	var out []string
	if limit != path && strings.Contains(limit, "{") {
		out = append(out, path)
	}
	if filled, ok := fillResource(resource, params); ok && filled != limit && filled != path {
		out = append(out, filled)
	}
	return out
}

// fillResource replaces each "{name}" or "{name+}" segment of resource by
// its parameter in params, escaped segment by segment as a request path is
// (a greedy parameter keeps its '/'). ok is false when resource has no
// parameter, or one that params lacks.
func fillResource(resource string, params map[string]string) (string, bool) {
	if !strings.HasPrefix(resource, "/") || !strings.Contains(resource, "{") {
		return "", false
	}
	segs := strings.Split(resource, "/")
	for i, seg := range segs {
		name, ok := strings.CutPrefix(seg, "{")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, "}")
		if !ok {
			return "", false
		}
		name, greedy := strings.CutSuffix(name, "+")
		v, ok := params[name]
		if !ok {
			return "", false
		}
		if !greedy {
			segs[i] = url.PathEscape(v)
			continue
		}
		parts := strings.Split(v, "/")
		for j, part := range parts {
			parts[j] = url.PathEscape(part)
		}
		segs[i] = strings.Join(parts, "/")
	}
	return strings.Join(segs, "/"), true
}

// StripStage removes a leading "/<stage>" from a path as received that
// carries it (REST requestContext.path, HTTP API paths on a named stage),
// so that routes match on every stage as they do for REST APIs. It strips
// the decoded path and re-escapes the rest the way a router then reads it
// (so "/prod/auth%2Flogin" is "/auth/login" there, and "/%70rod/x" loses
// its stage too). A path that does not decode (the API function answers
// it 400) is compared as it is. The $default stage, and no stage, strip
// nothing.
func StripStage(path, stage string) string {
	if stage == "" || stage == "$default" {
		return path
	}
	prefix := "/" + stage
	if decoded, err := url.PathUnescape(path); err == nil && strings.Contains(path, "%") {
		if decoded == prefix {
			return "/"
		}
		if rest, ok := strings.CutPrefix(decoded, prefix+"/"); ok {
			return (&url.URL{Path: "/" + rest}).EscapedPath()
		}
		return path
	}
	if path == prefix {
		return "/"
	}
	if strings.HasPrefix(path, prefix+"/") {
		return path[len(prefix):]
	}
	return path
}
