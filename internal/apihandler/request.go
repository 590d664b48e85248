package apihandler

import (
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/slidegate/slidegate/internal/app"
)

// maxHeaders bounds how many request headers are copied into an
// app.Request: API Gateway itself caps a request's headers at 10 KB, but a
// hand-made event can hold anything.
const maxHeaders = 128

// gatewayRequest is what one HTTP request tells slidegate, read once: the
// app.Request, and the authorizer's context when API Gateway ran the
// slidegate authorizer before the function.
type gatewayRequest struct {
	app.Request
	// Authorizer is requestContext.authorizer (REST) or
	// requestContext.authorizer.lambda (HTTP API); nil without an
	// authorizer.
	Authorizer map[string]any
}

// readRequest builds the gatewayRequest of r. The source address and stage
// variables come from the API Gateway event the proxy library put in r's
// context (REST or HTTP API), never from a header such as X-Forwarded-For,
// which any caller can write. A request served without an event (a local
// HTTP server) is counted by its TCP peer address.
func readRequest(r *http.Request) gatewayRequest {
	req := gatewayRequest{Request: app.Request{
		Method: strings.ToUpper(r.Method),
		// As the router reads it: escaped, decoded by the matching
		// (config.RequestPath) exactly once.
		Path:            r.URL.EscapedPath(),
		Headers:         lowerHeaders(r.Header),
		LambdaRequestID: app.LambdaRequestID(r.Context()),
	}}
	if rc, ok := core.GetAPIGatewayContextFromContext(r.Context()); ok {
		req.RequestID = rc.RequestID
		req.SourceIP = rc.Identity.SourceIP
		// The path parameters are left out: this router routes on the
		// path it is given, base path and all.
		req.Path, req.ServedPaths = app.LimitPath(rc.ResourcePath, req.Path), app.ServedPaths(rc.ResourcePath, req.Path, nil)
		req.APIID = rc.APIID
		req.Stage = rc.Stage
		req.Authorizer = rc.Authorizer
		req.StageVariables, _ = core.GetStageVarsFromContext(r.Context())
		return req
	}
	if rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context()); ok {
		req.RequestID = rc.RequestID
		req.RouteKey = rc.RouteKey
		req.SourceIP = rc.HTTP.SourceIP
		if rc.Authorizer != nil {
			req.Authorizer = rc.Authorizer.Lambda
		}
		req.StageVariables, _ = core.GetStageVarsFromContextV2(r.Context())
		return req
	}
	req.SourceIP = peerAddress(r.RemoteAddr)
	return req
}

// credentialHeaders are the headers identity.Resolver reads (lower-case).
// They are kept whatever else a request holds: dropping one would turn a
// caller with an unknown key into an anonymous one, and a 401 into a 200.
var credentialHeaders = [...]string{"x-api-key", "authorization"}

// lowerHeaders copies the first value of each header under its lower-case
// name, as app.Request wants them, keeping at most maxHeaders. The
// credential headers are always kept; the others are chosen by sorted name,
// never by map iteration order, so that the same request always gives the
// same app.Request. When names differ only in case (a hand-made event), the
// exactly lower-case spelling wins, else the one that sorts first: the
// authorizer's rule.
func lowerHeaders(h http.Header) map[string]string {
	names := make([]string, 0, len(h))
	for name, values := range h {
		if len(values) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make(map[string]string, min(len(names), maxHeaders))
	add := func(name, lower string) {
		if _, dup := out[lower]; !dup || name == lower {
			out[lower] = h[name][0]
		}
	}
	for _, name := range names {
		if lower := strings.ToLower(name); slices.Contains(credentialHeaders[:], lower) {
			add(name, lower)
		}
	}
	for _, name := range names {
		lower := strings.ToLower(name)
		if slices.Contains(credentialHeaders[:], lower) {
			continue
		}
		if _, dup := out[lower]; dup || len(out) < maxHeaders {
			add(name, lower)
		}
	}
	return out
}

// peerAddress is the host of a "host:port" remote address, or the address
// itself when it has no port.
func peerAddress(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// stagePrefix is the path prefix an HTTP API adds to rawPath for a named
// stage ("/prod" for stage "prod"); empty for the $default stage and for
// REST APIs, whose proxy event's path already leaves the stage out.
func stagePrefix(r *http.Request) string {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok || rc.Stage == "" || rc.Stage == "$default" {
		return ""
	}
	return "/" + rc.Stage
}
