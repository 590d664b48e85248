// Package authorizer is slidegate's API Gateway Lambda authorizer: the REST
// API REQUEST authorizer and the HTTP API (v2) simple-response authorizer,
// in one handler. It turns the event into an apigw.Request, asks the runtime
// for one decision, and turns the Outcome's Kind into API Gateway's answer. It is
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
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// ErrUnauthorized is the error whose message, exactly "Unauthorized", makes
// API Gateway answer 401.
var ErrUnauthorized = errors.New("Unauthorized")

// ErrUndecidable is the error of a request whose limits can never be
// decided (a configuration that pkg/ratelimit rejects); API Gateway answers
// it like ratelimit.ErrUnavailable, the REST authorizer's error for a
// fail-closed route Redis could not decide. Any error other than
// "Unauthorized" makes a REST API answer with AUTHORIZER_FAILURE (500,
// mapped to 503 by template.yaml). An HTTP API would answer it with a bare
// 500, so the HTTP API authorizer answers the same outage with a refusal
// (403), or, with HTTP_API_DENIALS=forward, apigw.CtxUnavailable in its
// context instead.
var ErrUndecidable = errors.New("rate limit cannot be decided")

// Handler answers authorizer events. It is safe for concurrent use.
type Handler struct {
	rt *instance.Runtime
	// logger is the runtime's, within a log budget: a caller can send
	// malformed events in a flood.
	logger *slog.Logger
	// wrongType logs, once per process, that the authorizer is
	// configured as another type than REQUEST (misconfigured).
	wrongType sync.Once
}

// New returns a handler deciding with rt. Its own log lines (malformed
// events) go to rt's logger within the default observe.LogSampling budget;
// the decisions' lines are the runtime's.
func New(rt *instance.Runtime) *Handler {
	return &Handler{rt: rt, logger: slog.New(observe.SampledHandler(rt.Logger().Handler(), observe.LogSampling{}))}
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
	if id := apigw.LambdaRequestID(ctx); id != "" {
		attrs = append(attrs, slog.String("lambdaRequestId", truncate.Text(id, maxLoggedLen)))
	}
	if err != nil {
		// encoding/json's errors name types and fields, and at most one
		// character of the input: never a header value.
		attrs = append(attrs, slog.String("error", truncate.Text(err.Error(), maxLoggedLen)))
	}
	h.logger.LogAttrs(ctx, slog.LevelError, msg, attrs...)
	return ErrUnauthorized
}

// misconfigured answers an event of an authorizer of another type than
// REQUEST (a TOKEN authorizer: its event has a token and a method ARN, no
// source address, method or path to decide on) with "Unauthorized", never
// Allow, and logs what is wrong once per process: every request through
// such an authorizer is the same mistake.
func (h *Handler) misconfigured(ctx context.Context, typ string) error {
	h.wrongType.Do(func() {
		h.rt.Logger().LogAttrs(ctx, slog.LevelError,
			truncate.Text(typ, 16)+" authorizer event: slidegate's authorizer must be a REQUEST authorizer "+
				"(REST API: Type REQUEST, identity source context.identity.sourceIp, result caching off; "+
				"template.yaml's RateLimitAuthorizer is one); every request through this one is answered Unauthorized (401)",
			slog.String("answer", "Unauthorized"), slog.String("type", truncate.Text(typ, 16)))
	})
	return ErrUnauthorized
}

// maxLoggedLen bounds the request id and the error of a malformed event's
// log line.
const maxLoggedLen = 200

// REST answers a REST API REQUEST authorizer event with a policy on the
// request's own method ARN (no wildcard: with caching off, the policy is
// only ever used for this request).
func (h *Handler) REST(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	if ev.Type != "" && ev.Type != "REQUEST" {
		return events.APIGatewayCustomAuthorizerResponse{}, h.misconfigured(ctx, ev.Type)
	}
	if ev.MethodArn == "" || !strings.HasPrefix(ev.MethodArn, "arn:") {
		return events.APIGatewayCustomAuthorizerResponse{}, h.malformed(ctx, "REST event without a methodArn", nil)
	}
	// The details of an error are in the decision's log line; the message
	// Lambda returns stays short and fixed. An outage is checked by its
	// Kind before any 401: on a fail-closed route Redis cannot decide, a
	// 401 would tell a caller, uncounted, that its key or token is bad.
	o, _ := h.rt.Decide(ctx, apigw.FromRESTAuthorizer(ctx, ev))
	switch o.Kind {
	case apigw.Unavailable:
		return events.APIGatewayCustomAuthorizerResponse{}, ratelimit.ErrUnavailable
	case apigw.Undecidable:
		return events.APIGatewayCustomAuthorizerResponse{}, ErrUndecidable
	case apigw.Unauthorized:
		return events.APIGatewayCustomAuthorizerResponse{}, ErrUnauthorized
	}
	// Everything else is a policy: Deny (429 through template.yaml's
	// gateway response) for every Kind that does not admit, the
	// UnauthorizedOverLimit one included.
	effect, describe := "Allow", apigw.AuthorizerContext
	if !o.Admitted() {
		// Every key ACCESS_DENIED maps, whatever denied the request.
		effect, describe = "Deny", apigw.DenyContext
	}
	resp := events.APIGatewayCustomAuthorizerResponse{
		PrincipalID: apigw.PrincipalID(o),
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{
			Version: "2012-10-17",
			Statement: []events.IAMPolicyStatement{{
				Action:   []string{"execute-api:Invoke"},
				Effect:   effect,
				Resource: []string{ev.MethodArn},
			}},
		},
		Context: describe(o),
	}
	if o.Caller.Tier == identity.TierOrg {
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
//     (apigw.AuthorizerUnavailableContext). The API function's middleware
//     reads them and answers docs/contract.md's 429 or 503 without counting the
//     request again. Only for integrations that honour that context: any
//     other backend behind the same authorizer would serve the request.
//
// Either way, an apigw.Unauthorized outcome is not authorized (403), an
// UnauthorizedOverLimit one is a denial like any other, and an Undecidable
// one is an error (500).
func (h *Handler) HTTP(ctx context.Context, ev events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	forward := h.rt.HTTPAPIDenials() == config.DenialsForward
	o, _ := h.rt.Decide(ctx, apigw.FromHTTPAuthorizer(ctx, ev))
	switch {
	case o.Kind == apigw.Undecidable:
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, ErrUndecidable
	case o.Kind == apigw.Unavailable && forward:
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{
			IsAuthorized: true,
			Context:      apigw.AuthorizerUnavailableContext(o, httplimit.DefaultUnavailableRetryAfter),
		}, nil
	case o.Kind == apigw.Unavailable, o.Kind == apigw.Unauthorized, o.Kind == apigw.Blocked, !o.Admitted() && !forward:
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{
		IsAuthorized: true,
		Context:      apigw.AuthorizerContext(o),
	}, nil
}
