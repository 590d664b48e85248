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
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/app"
)

// ErrUnauthorized is the error whose message, exactly "Unauthorized", makes
// API Gateway answer 401.
var ErrUnauthorized = errors.New("Unauthorized")

// ErrUnavailable is the error of a fail-closed route Redis could not
// decide. Any error other than "Unauthorized" makes API Gateway answer
// with AUTHORIZER_FAILURE (500, mapped to 503 by template.yaml).
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
}

// New returns a handler deciding with rt.
func New(rt *app.Runtime) *Handler { return &Handler{rt: rt} }

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
	if err != nil {
		attrs = append(attrs, slog.String("error", clip(err.Error())))
	}
	h.rt.Logger().LogAttrs(ctx, slog.LevelError, msg, attrs...)
	return ErrUnauthorized
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
		Method:         method,
		Path:           path,
		SourceIP:       ev.RequestContext.Identity.SourceIP,
		Headers:        mergeHeaders(ev.Headers, ev.MultiValueHeaders),
		StageVariables: ev.StageVariables,
	}
	o, err := h.rt.Decide(ctx, req)
	if o.Unauthorized {
		return events.APIGatewayCustomAuthorizerResponse{}, ErrUnauthorized
	}
	if err != nil {
		return events.APIGatewayCustomAuthorizerResponse{}, failure(err)
	}
	effect := "Deny"
	if o.Result.Allowed {
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
// and cannot turn it into a 429, so a request over its limit is authorized
// WITH the denial in its context (retryAfter present): the API function's
// middleware reads it and answers 429 with the SPEC headers and body, without
// counting the request again. Unknown keys and bad tokens are not authorized
// (403); a fail-closed route Redis cannot decide is an error (500).
//
// This relies on the integration honouring the context: put the API
// function (or another slidegate middleware) behind an HTTP API authorizer,
// never a backend that ignores retryAfter.
func (h *Handler) HTTP(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	rc := ev.RequestContext
	path := rc.HTTP.Path
	if path == "" {
		path = ev.RawPath
	}
	req := app.Request{
		Method:         rc.HTTP.Method,
		Path:           stripStage(path, rc.Stage),
		SourceIP:       rc.HTTP.SourceIP,
		Headers:        ev.Headers,
		StageVariables: ev.StageVariables,
	}
	o, err := h.rt.Decide(ctx, req)
	if o.Unauthorized {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
	}
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, failure(err)
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{
		IsAuthorized: true,
		Context:      app.AuthorizerContext(o),
	}, nil
}

// stripStage removes a leading "/<stage>" from a path that carries it (REST
// requestContext.path, HTTP API paths on a named stage).
func stripStage(path, stage string) string {
	if stage == "" || stage == "$default" {
		return path
	}
	prefix := "/" + stage
	if path == prefix {
		return "/"
	}
	if strings.HasPrefix(path, prefix+"/") {
		return path[len(prefix):]
	}
	return path
}

// mergeHeaders returns the single-value headers, completed by the first
// value of any header present only in the multi-value map.
func mergeHeaders(single map[string]string, multi map[string][]string) map[string]string {
	if len(multi) == 0 {
		return single
	}
	out := make(map[string]string, len(single)+len(multi))
	for k, v := range single {
		out[k] = v
	}
	for k, vs := range multi {
		if _, ok := out[k]; !ok && len(vs) > 0 {
			out[k] = vs[0]
		}
	}
	return out
}

func clip(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
