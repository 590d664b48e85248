// Package contract is slidegate's HTTP contract, as docs/contract.md gives
// it: the JSON error bodies and their codes, the phrase they say a wait
// with, the spelling of header names in a Lambda proxy response and the
// authorizer's context keys. The rate-limit headers' values are package
// httplimit's (httplimit.SetHeaders and the helpers it writes them with).
//
// It is the product's, not a rate limiter's: the API function, the
// authorizer's gateway responses and the local server all answer with these
// bytes, so they are written once, here.
package contract

import (
	"net/http"
	"strconv"
	"strings"
)

// ContentTypeJSON is the Content-Type of every error body.
const ContentTypeJSON = "application/json"

// Codes of the JSON error bodies.
const (
	CodeTooManyRequests    = "TOO_MANY_REQUESTS"
	CodeServiceUnavailable = "SERVICE_UNAVAILABLE"
	CodeUnauthorized       = "UNAUTHORIZED"
	CodeInternalError      = "INTERNAL_ERROR"
	CodeForbidden          = "FORBIDDEN"
)

// TooManyRequestsBody is the JSON body of a 429, e.g.
//
//	{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 18 seconds.","retry_after_seconds":18}}
//
// retryAfterSeconds should be the response's Retry-After value; below 1 it
// is said as 1.
func TooManyRequestsBody(retryAfterSeconds int64) []byte {
	return errorBody(CodeTooManyRequests, "Rate limit exceeded.", retryAfterSeconds)
}

// TooManyInFlightBody is the JSON body of the 429 of a request refused by
// a full in-flight limit (RATE_LIMIT_CONCURRENCY): the same code as a rate
// limit's, so that clients handling one handle both, and its own message:
//
//	{"error":{"code":"TOO_MANY_REQUESTS","message":"Too many requests in progress. Try again in 1 second.","retry_after_seconds":1}}
func TooManyInFlightBody(retryAfterSeconds int64) []byte {
	return errorBody(CodeTooManyRequests, "Too many requests in progress.", retryAfterSeconds)
}

// ServiceUnavailableBody is the JSON body of the 503 of a fail-closed route
// that could not be decided.
func ServiceUnavailableBody(retryAfterSeconds int64) []byte {
	return errorBody(CodeServiceUnavailable, "Rate limiting is temporarily unavailable.", retryAfterSeconds)
}

// UnauthorizedBody is the JSON body of a 401: credentials were presented
// and do not verify.
func UnauthorizedBody() []byte {
	return []byte(`{"error":{"code":"` + CodeUnauthorized + `","message":"The API key or bearer token is not valid."}}`)
}

// ForbiddenBody is the JSON body of a 403: the request's source network
// is blocked (RATE_LIMIT_NETWORKS).
func ForbiddenBody() []byte {
	return []byte(`{"error":{"code":"` + CodeForbidden + `","message":"Requests from this network are not accepted."}}`)
}

// InternalErrorBody is the JSON body of a 500: a request could not be rate
// limited for a reason other than Redis being unavailable.
func InternalErrorBody() []byte {
	return []byte(`{"error":{"code":"` + CodeInternalError + `","message":"The request could not be rate limited."}}`)
}

// RetryPhrase is how the JSON bodies say a wait: "18 seconds", "1 second".
// The authorizer passes it in its context so that the gateway response's
// body, which cannot branch, reads the same as the API function's.
func RetryPhrase(seconds int64) string {
	seconds = max(seconds, 1)
	if seconds == 1 {
		return "1 second"
	}
	return strconv.FormatInt(seconds, 10) + " seconds"
}

func errorBody(code, sentence string, seconds int64) []byte {
	seconds = max(seconds, 1)
	n := strconv.FormatInt(seconds, 10)
	var b strings.Builder
	b.Grow(128)
	b.WriteString(`{"error":{"code":"`)
	b.WriteString(code)
	b.WriteString(`","message":"`)
	b.WriteString(sentence)
	b.WriteString(" Try again in ")
	b.WriteString(RetryPhrase(seconds))
	b.WriteString(".")
	b.WriteString(`","retry_after_seconds":`)
	b.WriteString(n)
	b.WriteString("}}")
	return []byte(b.String())
}

// HeaderDegraded is the header, with the value "true", on every answer
// whose limits the local fallback decided because Redis (or a secret the
// decision needs) could not be reached: the outside sign `slidegate
// verify` reads. It tells a caller no more than GET /v1/quota's
// "degraded" already does.
const HeaderDegraded = "X-RateLimit-Degraded"

// SpecHeaderName returns the spelling the contract (docs/contract.md) gives
// a rate-limit header ("RateLimit-Policy", "X-RateLimit-Reset") for any
// spelling of its name, and any other name unchanged. net/http stores
// header names in its canonical form ("Ratelimit-Policy"); HTTP names are
// case-insensitive, but a Lambda proxy response's headers are a JSON map
// that clients and tests index exactly, so the functions respell them at
// the edge.
func SpecHeaderName(name string) string {
	switch http.CanonicalHeaderKey(name) {
	case "Ratelimit-Policy":
		return "RateLimit-Policy"
	case "Ratelimit":
		return "RateLimit"
	case "Ratelimit-Limit":
		return "RateLimit-Limit"
	case "Ratelimit-Remaining":
		return "RateLimit-Remaining"
	case "Ratelimit-Reset":
		return "RateLimit-Reset"
	case "X-Ratelimit-Limit":
		return "X-RateLimit-Limit"
	case "X-Ratelimit-Remaining":
		return "X-RateLimit-Remaining"
	case "X-Ratelimit-Reset":
		return "X-RateLimit-Reset"
	case "X-Ratelimit-Degraded":
		return HeaderDegraded
	}
	return name
}

// Authorizer context keys: the contract between slidegate's authorizer, the
// middleware behind it (httplimit.FromAuthorizerContext) and the templates'
// gateway responses ($context.authorizer.<key>), listed with their types in
// docs/contract.md ("Context keys").
const (
	CtxTier       = "tier"       // caller's tier
	CtxLimit      = "limit"      // count of the closest limit
	CtxRemaining  = "remaining"  // units left in it
	CtxReset      = "reset"      // seconds until reset (RateLimit-Reset; for a denial, = retryAfter)
	CtxPolicy     = "policy"     // RateLimit-Policy value
	CtxRateLimit  = "rateLimit"  // RateLimit value, e.g. "anonymous";r=12;t=41 (gateway responses cannot compute it)
	CtxName       = "name"       // policy name of the closest limit
	CtxWindow     = "window"     // its window, seconds
	CtxResetAt    = "resetAt"    // Unix seconds of the reset (X-RateLimit-Reset)
	CtxRetryAfter = "retryAfter" // whole seconds, >= 1, only when denied
	CtxRetryIn    = "retryIn"    // the wait in words ("18 seconds", "1 second"), only when denied
	CtxDegraded   = "degraded"   // true, only when decided by the local fallback
	// CtxUnavailable is true only in an HTTP API authorizer's answer for a
	// fail-closed route Redis could not decide. An HTTP API answers an
	// authorizer error with a bare 500, so the authorizer authorizes the
	// request with this flag (and tier and retryAfter only: there is no
	// decision) and the API function answers docs/contract.md's 503 with
	// Retry-After and code SERVICE_UNAVAILABLE without asking Redis again
	// (its Retry-After is the function's own UnavailableRetryAfter, 1 s by
	// default like the authorizer's and template.yaml's). The REST
	// authorizer never sets it: it returns an error, which template.yaml's
	// AUTHORIZER_FAILURE response maps to the same 503.
	CtxUnavailable = "unavailable"
	// CtxBlocked is true when the source address is in a blocked network
	// (RATE_LIMIT_NETWORKS): a REST authorizer answers Deny with it, and
	// no limit was asked. A REST API answers every Deny with the one
	// status of its ACCESS_DENIED gateway response (429), so the context
	// also carries CtxRetryAfter, BlockedRetryAfter, for its body.
	CtxBlocked = "blocked"
	// CtxUnlimited is true when the source address is in an unlimited
	// network: the request was admitted without a limit.
	CtxUnlimited = "unlimited"
	// CtxControl names the live control that changed the decision
	// (ControlBlocked, ControlExempt or ControlScaled), only when one did;
	// CtxControlUntil is when it ends (Unix seconds, rounded up) and
	// CtxControlFactor a scale's factor.
	CtxControl       = "control"
	CtxControlUntil  = "controlUntil"
	CtxControlFactor = "controlFactor"
)

// The names of the live controls that change a decision, as the decision
// log line, the metrics and the authorizer context (CtxControl) give them.
const (
	// ControlBlocked: a block on the caller's identity or its network
	// denied the request.
	ControlBlocked = "blocked-by-control"
	// ControlExempt: an exemption on the caller's identity admitted the
	// request without spending, or one on its network lifted its limits.
	ControlExempt = "exempt"
	// ControlScaled: the caller's limits were scaled.
	ControlScaled = "scaled"
)
