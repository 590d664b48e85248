// Package edge is where API Gateway meets slidegate, for both functions:
// an event becomes one Request, normalised once (header names folded to
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
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/slidegate/slidegate/internal/truncate"
)

// Request is what slidegate needs to know of one API request, whatever the
// event shape it arrived in (REST authorizer, HTTP API authorizer, REST or
// HTTP API proxy event, or a local HTTP request).
type Request struct {
	// Method is the HTTP method, upper case (NormalMethod).
	Method string
	// Path is the resource path the caller asked for, without the stage,
	// as received: percent-encoded as the event or URL carries it, e.g.
	// "/auth/login" or "/%61uth/login". Route limits and fail-closed globs
	// match it as it is served (policy.ParsePath), so it must not
	// be decoded beforehand (decoding twice would read "%2561" as "a").
	Path string
	// ServedPaths are the other paths a REST request may be served as
	// (ServedPaths: the request path behind a resource with a parameter,
	// the resource with its parameters filled in), as received: route
	// limits and fail-closed globs hold a request when they match Path or
	// any of them. Never logged: unlike a resource, they may hold secrets.
	ServedPaths []string
	// SourceIP is the caller's address as API Gateway saw it
	// (requestContext.identity.sourceIp or requestContext.http.sourceIp);
	// never X-Forwarded-For.
	SourceIP string
	// Headers holds the request headers with lower-case names
	// (FoldHeaders).
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

// LambdaRequestID is the AWS request id of the Lambda invocation whose
// context ctx is (aws-lambda-go's lambdacontext), or "" outside Lambda.
func LambdaRequestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}

// NormalMethod is an HTTP method as a Request holds it: upper case.
func NormalMethod(method string) string { return strings.ToUpper(method) }

// Bounds of caller-chosen text in RouteName.
const (
	maxMethodLen = 16
	maxPathLen   = 256
)

// RouteName is how a request's route is logged and named in errors: an
// HTTP API's route key when it names one (a template like
// "POST /auth/{proxy+}", never the caller's path), else the method and the
// path (for REST the resource, LimitPath), clipped and without any query
// string.
func RouteName(req Request) string {
	if req.RouteKey != "" && req.RouteKey != "$default" {
		return truncate.Text(req.RouteKey, maxMethodLen+1+maxPathLen)
	}
	path, _, _ := strings.Cut(req.Path, "?")
	return truncate.Text(req.Method, maxMethodLen) + " " + truncate.Text(path, maxPathLen)
}
