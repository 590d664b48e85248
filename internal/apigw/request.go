// Package apigw is where API Gateway meets slidegate, for both functions:
// each event shape becomes one Request in one constructor (FromRESTAuthorizer,
// FromHTTPAuthorizer, FromRESTProxy, FromHTTPAPIProxy; FromHTTPRequest
// without an event), normalised once (header names folded to
// lower case, the stage stripped from the path, the method upper-cased),
// and the one Outcome of its decision becomes the answer: the Kind every
// answer derives from, and the authorizer context the API function reads
// back (docs/contract.md, "Context keys").
//
//	event -> Request (this package) -> instance.Runtime.Decide -> Outcome
//	-> policy, simple response or HTTP answer (this package's Kind)
package apigw

import (
	"context"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/slidegate/slidegate/internal/truncate"
)

// Request is what slidegate needs to know of one API request, whatever the
// event shape it arrived in (REST authorizer, HTTP API authorizer, REST or
// HTTP API proxy event, or a local HTTP request).
type Request struct {
	// Method is the HTTP method, upper case (normalMethod).
	Method string
	// Path is the resource path the caller asked for, without the stage,
	// as received: percent-encoded as the event or URL carries it, e.g.
	// "/auth/login" or "/%61uth/login". Route limits and fail-closed globs
	// match it as it is served (route.ParsePath), so it must not
	// be decoded beforehand (decoding twice would read "%2561" as "a").
	Path string
	// ServedPaths are the other paths a REST request may be served as
	// (servedPaths: the request path behind a resource with a parameter,
	// the resource with its parameters filled in), as received: route
	// limits and fail-closed globs hold a request when they match Path or
	// any of them. Never logged: unlike a resource, they may hold secrets.
	ServedPaths []string
	// SourceIP is the caller's address as API Gateway saw it
	// (requestContext.identity.sourceIp or requestContext.http.sourceIp);
	// never X-Forwarded-For.
	SourceIP string
	// Headers holds the request headers with lower-case names
	// (foldHeaders).
	Headers map[string]string
	// StageVariables are the REST API stage's variables, if any.
	StageVariables map[string]string
	// APIID is the REST API's id (requestContext.apiId): only API keys of
	// its usage plans are known keys. Empty where there is none (HTTP APIs
	// have no usage plans): then every enabled key of the account counts,
	// unless API_KEY_HASHES is set.
	APIID string
	// Stage is the REST API's stage (requestContext.stage): only API keys
	// of usage plans of this stage of APIID are known keys. Empty where
	// APIID is, or when unknown: then the keys of every stage of APIID.
	Stage string
	// RequestID is API Gateway's id of the request
	// (requestContext.requestId of REST and HTTP API events), for the
	// decision's log line and metrics record; empty when unknown.
	RequestID string
	// LambdaRequestID is the id of the Lambda invocation deciding the
	// request (LambdaRequestID), for the same; empty outside Lambda.
	LambdaRequestID string
	// RouteKey is the HTTP API route the request matched (routeKey, e.g.
	// "POST /auth/{proxy+}"), logged as the request's route instead of its
	// path, which may carry secrets; empty for REST, whose Path is already
	// the resource. "$default" names no route and is logged as the path.
	RouteKey string
}

// The constructors below are the only places a Request is made of an
// event: one per shape. Each normalises once: the method upper-cased
// (normalMethod), the header names folded (foldHeaders), the stage
// stripped (StripStage), the path route limits match chosen (limitPath,
// servedPaths).

// FromRESTAuthorizer is the Request of a REST API REQUEST authorizer event
// (also the shape of an HTTP API authorizer of payload format 1.0), ctx
// being the Lambda invocation's context.
func FromRESTAuthorizer(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) Request {
	rc := ev.RequestContext
	method := ev.HTTPMethod
	if method == "" {
		method = rc.HTTPMethod
	}
	path := ev.Path
	if path == "" {
		path = StripStage(rc.Path, rc.Stage)
	}
	return Request{
		Method:          normalMethod(method),
		Path:            limitPath(ev.Resource, path),
		ServedPaths:     servedPaths(ev.Resource, path, ev.PathParameters),
		SourceIP:        rc.Identity.SourceIP,
		APIID:           rc.APIID,
		Stage:           rc.Stage,
		Headers:         foldHeaders(ev.Headers, ev.MultiValueHeaders),
		StageVariables:  ev.StageVariables,
		RequestID:       rc.RequestID,
		LambdaRequestID: LambdaRequestID(ctx),
	}
}

// FromHTTPAuthorizer is the Request of an HTTP API (payload 2.0)
// authorizer event. Its path is rawPath first, as the API function's proxy
// library reads it, without the stage.
func FromHTTPAuthorizer(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) Request {
	rc := ev.RequestContext
	path := ev.RawPath
	if path == "" {
		path = rc.HTTP.Path
	}
	return Request{
		Method:          normalMethod(rc.HTTP.Method),
		Path:            StripStage(path, rc.Stage),
		SourceIP:        rc.HTTP.SourceIP,
		Headers:         foldHeaders(ev.Headers, nil),
		StageVariables:  ev.StageVariables,
		RequestID:       rc.RequestID,
		LambdaRequestID: LambdaRequestID(ctx),
		RouteKey:        ev.RouteKey,
	}
}

// FromRESTProxy is the Request of a REST API proxy event (or an HTTP API
// event of payload format 1.0) as the proxy library serves it: r, with the
// event's request context rc and stage variables. The source address is
// the event's, never a header such as X-Forwarded-For, which any caller
// can write. The path parameters are left out: the API function routes on
// the path it is given, base path and all.
func FromRESTProxy(r *http.Request, rc events.APIGatewayProxyRequestContext, stageVars map[string]string) Request {
	req := fromHTTP(r)
	req.RequestID = rc.RequestID
	req.SourceIP = rc.Identity.SourceIP
	req.Path, req.ServedPaths = limitPath(rc.ResourcePath, req.Path), servedPaths(rc.ResourcePath, req.Path, nil)
	req.APIID = rc.APIID
	req.Stage = rc.Stage
	req.StageVariables = stageVars
	return req
}

// FromHTTPAPIProxy is the Request of an HTTP API (payload 2.0) proxy event
// as the proxy library serves it: r, with the event's request context rc
// and stage variables; the source address is the event's.
func FromHTTPAPIProxy(r *http.Request, rc events.APIGatewayV2HTTPRequestContext, stageVars map[string]string) Request {
	req := fromHTTP(r)
	req.RequestID = rc.RequestID
	req.RouteKey = rc.RouteKey
	req.SourceIP = rc.HTTP.SourceIP
	req.StageVariables = stageVars
	return req
}

// FromHTTPRequest is the Request of an HTTP request served without an API
// Gateway event (a local HTTP server): its caller is its TCP peer address.
func FromHTTPRequest(r *http.Request) Request {
	req := fromHTTP(r)
	req.SourceIP = r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		req.SourceIP = host
	}
	return req
}

// fromHTTP is what every HTTP request tells, whatever event it came in: the
// method, the path as the router reads it (escaped, decoded by the
// matching, route.Path, exactly once), the headers and the Lambda
// invocation.
func fromHTTP(r *http.Request) Request {
	return Request{
		Method:          normalMethod(r.Method),
		Path:            r.URL.EscapedPath(),
		Headers:         foldHeaders(nil, r.Header),
		LambdaRequestID: LambdaRequestID(r.Context()),
	}
}

// LambdaRequestID is the AWS request id of the Lambda invocation whose
// context ctx is (aws-lambda-go's lambdacontext), or "" outside Lambda.
func LambdaRequestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}

// normalMethod is an HTTP method as a Request holds it: upper case.
func normalMethod(method string) string { return strings.ToUpper(method) }

// Bounds of caller-chosen text in RouteName.
const (
	maxMethodLen = 16
	maxPathLen   = 256
)

// RouteName is how a request's route is logged and named in errors: an
// HTTP API's route key when it names one (a template like
// "POST /auth/{proxy+}", never the caller's path), else the method and the
// path (for REST the resource, limitPath), clipped and without any query
// string.
func RouteName(req Request) string {
	if req.RouteKey != "" && req.RouteKey != "$default" {
		return truncate.Text(req.RouteKey, maxMethodLen+1+maxPathLen)
	}
	path, _, _ := strings.Cut(req.Path, "?")
	return truncate.Text(req.Method, maxMethodLen) + " " + truncate.Text(path, maxPathLen)
}

// maxHeaders bounds how many request headers a Request keeps: API Gateway
// itself caps a request's headers at 10 KB, but a hand-made event can hold
// anything.
const maxHeaders = 128

// credentialHeaders are the headers identity.Resolver reads (lower case).
// They are kept whatever else a request holds: dropping one would turn a
// caller with an unknown key into an anonymous one, and a 401 into a 200.
var credentialHeaders = [...]string{"x-api-key", "authorization"}

// foldHeaders returns an event's or a request's headers with lower-case
// names, as Request.Headers holds them: the single-value headers,
// completed by the first value of any header present only in the
// multi-value ones (an http.Header is multi-value alone). When names
// differ only in case, the exactly lower-case spelling wins, else the one
// that sorts first: the same headers always give the same Request, which
// a map's iteration order would not. At most maxHeaders are kept: the
// credential headers always, then the others by sorted name.
func foldHeaders(single map[string]string, multi map[string][]string) map[string]string {
	out := make(map[string]string, min(len(single)+len(multi), maxHeaders))
	foldInto(out, single, func(v string) (string, bool) { return v, true })
	if len(multi) > 0 {
		fromMulti := make(map[string]string, len(multi))
		foldInto(fromMulti, multi, func(vs []string) (string, bool) {
			if len(vs) == 0 {
				return "", false
			}
			return vs[0], true
		})
		for name, v := range fromMulti {
			if _, ok := out[name]; !ok {
				out[name] = v
			}
		}
	}
	if len(out) <= maxHeaders {
		return out
	}
	kept := make(map[string]string, maxHeaders)
	for _, name := range credentialHeaders {
		if v, ok := out[name]; ok {
			kept[name] = v
		}
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if len(kept) == maxHeaders {
			break
		}
		kept[name] = out[name]
	}
	return kept
}

// foldInto adds h to out under lower-case names, visiting the names in
// sorted order so that the first spelling of a name to arrive is always
// the same one; an exactly lower-case spelling replaces it.
func foldInto[V any](out map[string]string, h map[string]V, value func(V) (string, bool)) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		v, ok := value(h[name])
		if !ok {
			continue
		}
		lower := strings.ToLower(name)
		if _, dup := out[lower]; dup && name != lower {
			continue
		}
		out[lower] = v
	}
}

// limitPath is the path a REST API request's route limits and fail-closed
// globs are matched against: the API Gateway resource it was routed to
// ("/auth/login", "/items/{id}") when it names one, else the request path.
//
// The resource is what the API was built with, whatever the caller's URL
// looked like: behind a custom domain with a base-path mapping the request
// path carries the base path ("/api/auth/login") and would slip past
// "/auth/*", the resource does not. A greedy resource ("/{proxy+}") says
// nothing about the route, so the path is used then, as received (the
// matching decodes it as the serving router does: route.Path). A
// glob's "*" matches a "{param}" segment like any other. A resource with
// a parameter ("/{section}/{action}") is matched too, but says too little
// alone: see servedPaths.
func limitPath(resource, path string) string {
	if resource == "" || !strings.HasPrefix(resource, "/") || strings.Contains(resource, "+}") {
		return path
	}
	return resource
}

// servedPaths are the other paths that route limits and fail-closed globs
// must match for a REST request routed to resource with the path
// parameters params (the event's pathParameters, decoded), besides
// limitPath; a glob that matches any of them holds the request
// (Request.ServedPaths). They are:
//
//   - the request path, when limitPath chose a resource with a parameter:
//     behind "/{section}/{action}", "/auth/login" is served as the login
//     while the resource matches no "/auth/*" glob;
//   - the resource with its parameters filled in, escaped, when the
//     resource has any and params names them all: "/{proxy+}" with proxy
//     "auth/login" is "/auth/login". Behind a custom domain's base-path
//     mapping the request path carries the base path ("/v2/auth/login")
//     while an integration's {proxy} does not: the backend serves the
//     login that the path alone would not show to "/auth/*".
//
// None when limitPath alone decides.
func servedPaths(resource, path string, params map[string]string) []string {
	limit := limitPath(resource, path)
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
