// Package app is the process-wide state of a slidegate function and the one
// path every request takes through it:
//
//	event (function) -> Request -> who is the caller (identity) and which
//	limits apply (config) -> one decision (pkg/ratelimit Gate) -> Outcome
//	-> answer (policy or HTTP response, in the function).
//
// A Runtime is built once per process, at cold start, and shared by every
// warm invocation: the Redis client, the loaded scripts, the parsed
// configuration and the known API keys live in it, not in package
// variables.
package app

import (
	"context"
	"github.com/slidegate/slidegate/internal/config"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Request is what slidegate needs to know of one API request, whatever the
// event shape it arrived in (REST authorizer, HTTP API authorizer, REST or
// HTTP API proxy event, or a local HTTP request).
type Request struct {
	// Method is the HTTP method, upper case.
	Method string
	// Path is the resource path the caller asked for, without the stage,
	// as received: percent-encoded as the event or URL carries it, e.g.
	// "/auth/login" or "/%61uth/login". Route limits and fail-closed globs
	// match it as it is served (config.ParseRequestPath), so it must not
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
	// Headers holds the request headers with lower-case names.
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

// Tier names: the policy names of the per-caller limits.
const (
	TierAnonymous = "anonymous"
	TierUser      = "user"
	TierOrg       = "org"
)

// Caller is who a request is counted against.
type Caller struct {
	// Tier is TierAnonymous, TierUser or TierOrg.
	Tier string
	// Identity is the counted identity with its kind, e.g. "ip:203.0.113.7",
	// "sub:user-42" or "key:<sha256 hex of the API key>". It is hashed again
	// before it enters Redis.
	Identity string
	// Hash is Identity's hash, as logs and principal ids show it: 128 bits
	// of its HMAC-SHA-256 with the identity hash key (plain SHA-256 when
	// no key is configured), hex; empty while a configured key is not
	// read.
	Hash string
	// APIKey is the raw API key of an org caller, for the authorizer's
	// usageIdentifierKey; empty otherwise. Never logged.
	APIKey string
}

// Outcome is the answer to one Request.
type Outcome struct {
	// Caller is who was counted. For an unauthorized request it is the
	// anonymous caller of the source IP, who was charged.
	Caller Caller
	// Unauthorized is true when the request presented an API key that is
	// not known or a bearer token that does not verify. The request was
	// counted against its source IP's anonymous limit: the answer is 401
	// while that limit admits it, 429 once it denies.
	Unauthorized bool
	// FailClosed is true when the request's route fails closed.
	FailClosed bool
	// Result is the rate-limit decision over every limit that applies.
	Result ratelimit.Result
	// QuotaDenied is set by Runtime.Quota when the quota route's own limit
	// (RATE_LIMIT_QUOTA) denied the call: Result then holds that limit's
	// decision alone, and the answer is 429.
	QuotaDenied bool
	// Network is config.NetworkUnlimited or config.NetworkBlocked when the
	// source address is in such a network (RATE_LIMIT_NETWORKS): the
	// request was admitted, or refused, without a Redis call, and Result
	// holds no decision. Empty otherwise.
	Network string
	// Plan is the plan whose limits applied, "" for the tier's.
	Plan string
}

// Blocked reports whether the request came from a blocked network: it is
// refused (403), whatever it presented.
func (o Outcome) Blocked() bool { return o.Network == config.NetworkBlocked }

// Exempt reports whether the request came from an unlimited network: no
// limit applies to it.
func (o Outcome) Exempt() bool { return o.Network == config.NetworkUnlimited }

// ShadowDenied reports whether the request was admitted although a shadow
// limit (RATE_LIMIT_SHADOW) denied it.
func (o Outcome) ShadowDenied() bool {
	if !o.Result.Allowed {
		return false
	}
	for _, d := range o.Result.Decisions {
		if d.Shadow && !d.Allowed {
			return true
		}
	}
	return false
}
