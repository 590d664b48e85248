// Package authorizer is slidegate's API Gateway Lambda authorizer: the REST
// API REQUEST authorizer and the HTTP API (v2) simple-response authorizer,
// in one handler. It turns the event into an app.Request, asks the runtime
// for one decision, and turns the Outcome into API Gateway's answer. It is
// a package (not only a main) so that a local API server can run it
// in-process.
//
// One binary serves both event shapes because the decision path, the
// configuration and the warm state are the same; only the edges differ, and
// an operator deploys one artifact. The shape is told from the raw JSON:
// HTTP API authorizer events with payload format 2.0 carry "version":"2.0"
// (and "routeArn"); everything else is taken as a REST REQUEST event (which
// is also the shape of HTTP API payload format 1.0, answered with a policy
// as that format expects).
package authorizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/app"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/httplimit"
)

// ErrUnauthorized is the error whose message, exactly "Unauthorized", makes
// API Gateway answer 401.
var ErrUnauthorized = errors.New("Unauthorized")

// ErrUnavailable is the REST authorizer's error for a fail-closed route
// Redis could not decide. Any error other than "Unauthorized" makes a REST
// API answer with AUTHORIZER_FAILURE (500, mapped to 503 by template.yaml).
// An HTTP API would answer it with a bare 500, so the HTTP API authorizer
// answers the same outage with a refusal (403), or, with
// HTTP_API_DENIALS=forward, app.CtxUnavailable in its context instead.
var ErrUnavailable = errors.New("rate limiter unavailable")

// ErrUndecidable is the error of a request whose limits can never be
// decided (a configuration that pkg/ratelimit rejects); API Gateway answers
// it like ErrUnavailable.
var ErrUndecidable = errors.New("rate limit cannot be decided")

// failure maps a Decide error to the authorizer's error. The details are in
// the decision's log line; the message Lambda returns stays short and fixed.
func failure(err error) error {
	if app.IsUnavailable(err) {
		return ErrUnavailable
	}
	return ErrUndecidable
}

// Handler answers authorizer events. It is safe for concurrent use.
type Handler struct {
	rt *app.Runtime
	// logger is the runtime's, within a log budget: a caller can send
	// malformed events in a flood.
	logger *slog.Logger
}

// New returns a handler deciding with rt. Its own log lines (malformed
// events) go to rt's logger within the default app.LogSampling budget; the
// decisions' lines are the runtime's.
func New(rt *app.Runtime) *Handler {
	return &Handler{rt: rt, logger: slog.New(app.SampledHandler(rt.Logger().Handler(), app.LogSampling{}))}
}

// shape is the part of an event that tells which kind it is.
type shape struct {
	Version string `json:"version"`
}

// Invoke implements lambda.Handler: it tells the event's shape from its
// JSON and answers it. A payload that is not JSON of either shape is
// logged and answered "Unauthorized" (REST: 401), or, when it says it is an
// HTTP API 2.0 event, not authorized (HTTP API: 403).
func (h *Handler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var s shape
	if err := json.Unmarshal(payload, &s); err != nil {
		return nil, h.malformed(ctx, "not a JSON object", err)
	}
	if s.Version == "2.0" {
		var ev events.APIGatewayV2CustomAuthorizerV2Request
		if err := json.Unmarshal(payload, &ev); err != nil {
			// An HTTP API answers an authorizer error with 500; a simple
			// "not authorized" is its deterministic 403.
			_ = h.malformed(ctx, "HTTP API authorizer event", err)
			return marshal(events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false})
		}
		resp, err := h.HTTP(ctx, ev)
		if err != nil {
			return nil, err
		}
		return marshal(resp)
	}
	var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, h.malformed(ctx, "REST REQUEST authorizer event", err)
	}
	resp, err := h.REST(ctx, ev)
	if err != nil {
		return nil, err
	}
	return marshal(resp)
}

func marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode authorizer response: %w", err)
	}
	return b, nil
}

// malformed logs an event that cannot be decided and returns the REST
// answer to it, Unauthorized.
func (h *Handler) malformed(ctx context.Context, what string, err error) error {
	msg := "malformed authorizer event: " + what
	attrs := []slog.Attr{slog.String("answer", "Unauthorized")}
	if id := app.LambdaRequestID(ctx); id != "" {
		attrs = append(attrs, slog.String("lambdaRequestId", clip(id)))
	}
	if err != nil {
		// encoding/json's errors name types and fields, and at most one
		// character of the input: never a header value.
		attrs = append(attrs, slog.String("error", clip(err.Error())))
	}
	h.logger.LogAttrs(ctx, slog.LevelError, msg, attrs...)
	return ErrUnauthorized
}

// unauthorizedWithinLimit reports whether o is answered as unauthorized:
// a credential that does not verify, counted against the source IP's
// anonymous limit, which admitted it. When that limit denies it, the denial
// wins (429 with Retry-After), as in the API function's middleware: a caller
// out of budget learns when to come back, whatever it presented.
func unauthorizedWithinLimit(o app.Outcome) bool {
	return o.Unauthorized && (o.Result.Allowed || len(o.Result.Decisions) == 0)
}

// REST answers a REST API REQUEST authorizer event with a policy on the
// request's own method ARN (no wildcard: with caching off, the policy is
// only ever used for this request).
func (h *Handler) REST(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	if ev.MethodArn == "" || !strings.HasPrefix(ev.MethodArn, "arn:") {
		return events.APIGatewayCustomAuthorizerResponse{}, h.malformed(ctx, "REST event without a methodArn", nil)
	}
	method := ev.HTTPMethod
	if method == "" {
		method = ev.RequestContext.HTTPMethod
	}
	path := ev.Path
	if path == "" {
		path = stripStage(ev.RequestContext.Path, ev.RequestContext.Stage)
	}
	req := app.Request{
		Method:          method,
		Path:            app.LimitPath(ev.Resource, path),
		ServedPaths:     app.ServedPaths(ev.Resource, path, ev.PathParameters),
		SourceIP:        ev.RequestContext.Identity.SourceIP,
		APIID:           ev.RequestContext.APIID,
		Stage:           ev.RequestContext.Stage,
		Headers:         requestHeaders(ev.Headers, ev.MultiValueHeaders),
		StageVariables:  ev.StageVariables,
		RequestID:       ev.RequestContext.RequestID,
		LambdaRequestID: app.LambdaRequestID(ctx),
	}
	o, err := h.rt.Decide(ctx, req)
	if err != nil {
		// Before Unauthorized: on a fail-closed route Redis cannot decide,
		// a 401 would tell a caller, uncounted, that its key or token is
		// bad.
		return events.APIGatewayCustomAuthorizerResponse{}, failure(err)
	}
	// A blocked network is refused whatever it presented: a Deny whose
	// context says blocked.
	if !o.Blocked() && unauthorizedWithinLimit(o) {
		return events.APIGatewayCustomAuthorizerResponse{}, ErrUnauthorized
	}
	// An unauthorized request its source IP's anonymous limit denied falls
	// through to the Deny (429), as in the API function's middleware.
	effect := "Deny"
	if o.Result.Allowed && !o.Blocked() {
		effect = "Allow"
	}
	resp := events.APIGatewayCustomAuthorizerResponse{
		PrincipalID: app.PrincipalID(o),
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{
			Version: "2012-10-17",
			Statement: []events.IAMPolicyStatement{{
				Action:   []string{"execute-api:Invoke"},
				Effect:   effect,
				Resource: []string{ev.MethodArn},
			}},
		},
		Context: app.AuthorizerContext(o),
	}
	if o.Caller.Tier == app.TierOrg {
		resp.UsageIdentifierKey = o.Caller.APIKey
	}
	return resp, nil
}

// HTTP answers an HTTP API (payload 2.0) authorizer event with a simple
// response. An HTTP API answers every unauthorized simple response with 403
// and every authorizer error with 500, and can turn neither into a 429 or a
// 503. What happens to a request it cannot admit is therefore a setting,
// HTTP_API_DENIALS (config.Denials):
//
//   - refuse (the default): a request over its limit, and a fail-closed
//     route Redis cannot decide, are not authorized: the HTTP API answers
//     403 itself, whatever the integration behind it;
//   - forward: a request over its limit is authorized WITH the denial in
//     its context (retryAfter present), and a fail-closed route Redis
//     cannot decide is authorized with unavailable: true and retryAfter
//     (app.AuthorizerUnavailableContext). The API function's middleware
//     reads them and answers docs/contract.md's 429 or 503 without counting the
//     request again. Only for integrations that honour that context: any
//     other backend behind the same authorizer would serve the request.
//
// Either way, an unknown key or bad token within its source IP's anonymous
// limit is not authorized (403); one that limit denied is a denial like any
// other; a request whose limits can never be decided is an error (500).
func (h *Handler) HTTP(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	rc := ev.RequestContext
	// rawPath first, as the API function's proxy library reads it.
	path := ev.RawPath
	if path == "" {
		path = rc.HTTP.Path
	}
	req := app.Request{
		Method:          rc.HTTP.Method,
		Path:            stripStage(path, rc.Stage),
		SourceIP:        rc.HTTP.SourceIP,
		Headers:         requestHeaders(ev.Headers, nil),
		StageVariables:  ev.StageVariables,
		RequestID:       rc.RequestID,
		LambdaRequestID: app.LambdaRequestID(ctx),
		RouteKey:        ev.RouteKey,
	}
	forward := h.rt.Config().HTTPAPIDenials == config.DenialsForward
	o, err := h.rt.Decide(ctx, req)
	if err != nil {
		if !app.IsUnavailable(err) {
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, failure(err)
		}
		if !forward {
			return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
		}
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{
			IsAuthorized: true,
			Context:      app.AuthorizerUnavailableContext(o, httplimit.DefaultUnavailableRetryAfter),
		}, nil
	}
	if o.Blocked() || unauthorizedWithinLimit(o) || (!o.Result.Allowed && !forward) {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{
		IsAuthorized: true,
		Context:      app.AuthorizerContext(o),
	}, nil
}

// stripStage removes a leading "/<stage>" from a path as received that
// carries it (REST requestContext.path, HTTP API paths on a named stage),
// as the API function does: on the decoded path, the rest re-escaped the
// way its router then reads it (so "/prod/auth%2Flogin" is
// "/auth/login" there, and "/%70rod/x" loses its stage too). A path that
// does not decode (the API function answers it 400) is compared as it is.
func stripStage(path, stage string) string {
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

// requestHeaders returns the headers of an event with lower-case names, as
// app.Request wants them: the single-value headers, completed by the first
// value of any header present only in the multi-value map. When two names
// differ only in case, the choice between them is deterministic, never the
// order of a map iteration: the exactly lower-case spelling wins, then the
// one that sorts first.
func requestHeaders(single map[string]string, multi map[string][]string) map[string]string {
	out := make(map[string]string, len(single))
	addSorted(out, single, func(v string) (string, bool) { return v, true })
	if len(multi) > 0 {
		fromMulti := make(map[string]string, len(multi))
		addSorted(fromMulti, multi, func(vs []string) (string, bool) {
			if len(vs) == 0 {
				return "", false
			}
			return vs[0], true
		})
		for k, v := range fromMulti {
			if _, ok := out[k]; !ok {
				out[k] = v
			}
		}
	}
	return out
}

// addSorted adds h to out under lower-case names, visiting the names in
// sorted order so that the first spelling of a name to arrive is always
// the same one; an exactly lower-case spelling replaces it.
func addSorted[V any](out map[string]string, h map[string]V, value func(V) (string, bool)) {
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

func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
