package app

import "strings"

// LimitPath is the path a REST API request's route limits and fail-closed
// globs are matched against: the API Gateway resource it was routed to
// ("/auth/login", "/items/{id}") when it names one, else the request path.
//
// The resource is what the API was built with, whatever the caller's URL
// looked like: behind a custom domain with a base-path mapping the request
// path carries the base path ("/api/auth/login") and would slip past
// "/auth/*", the resource does not. A greedy resource ("/{proxy+}") says
// nothing about the route, so the path is used then, as received (the
// matching decodes it as the serving router does: config.RequestPath). A
// glob's "*" matches a "{param}" segment like any other. A resource with
// a parameter ("/{section}/{action}") is matched too, but says too little
// alone: see ServedPath.
func LimitPath(resource, path string) string {
	if resource == "" || !strings.HasPrefix(resource, "/") || strings.Contains(resource, "+}") {
		return path
	}
	return resource
}

// ServedPath is the request path that route limits and fail-closed globs
// must also match when LimitPath chose a resource with a path parameter,
// or "" when LimitPath alone decides. The serving router routes on the
// path: behind "/{section}/{action}", "/auth/login" is served as the login
// while the resource matches no "/auth/*" glob, so a glob that matches
// either of the two holds the request (Request.ServedPath).
func ServedPath(resource, path string) string {
	if limit := LimitPath(resource, path); limit != path && strings.Contains(limit, "{") {
		return path
	}
	return ""
}
