package apihandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// ErrMalformedEvent wraps every event the Lambda handler cannot serve: not
// JSON, not an API Gateway proxy event, or one the proxy library cannot turn
// into an HTTP request.
var ErrMalformedEvent = errors.New("malformed API Gateway proxy event")

// LambdaHandler serves an http.Handler to API Gateway: one entry point for
// REST (v1) and HTTP API (v2) proxy events, told apart by their JSON. It is
// safe for concurrent use and meant to be built once per process.
type LambdaHandler struct {
	rest    *httpadapter.HandlerAdapter
	httpAPI *httpadapter.HandlerAdapterV2
	logger  *slog.Logger
}

// NewLambdaHandler wraps h. logger receives one record per malformed event;
// slog.Default() when nil.
func NewLambdaHandler(h http.Handler, logger *slog.Logger) *LambdaHandler {
	if logger == nil {
		logger = slog.Default()
	}
	return &LambdaHandler{rest: httpadapter.New(h), httpAPI: httpadapter.NewV2(h), logger: logger}
}

// Invoke answers one raw event: an events.APIGatewayProxyResponse for a
// REST API proxy event (or an HTTP API event of payload format 1.0, the same
// shape), recognised by its httpMethod; an events.APIGatewayV2HTTPResponse
// for an HTTP API event of payload format 2.0, recognised by version "2.0"
// and requestContext.http.method. Anything else is malformed: logged and
// answered 400 with a JSON body (in the v1 response shape, which both API
// types accept). Invoke never returns an error, so API Gateway never turns
// one into a 502.
//
// The REST shape is tried first, so that the common event is parsed once.
func (l *LambdaHandler) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	var rest events.APIGatewayProxyRequest
	restErr := json.Unmarshal(payload, &rest)
	if restErr == nil && rest.HTTPMethod != "" {
		resp, err := l.rest.ProxyWithContext(ctx, rest)
		if err != nil {
			return l.malformed(ctx, fmt.Errorf("%w: REST event: %w", ErrMalformedEvent, err)), nil
		}
		resp.Headers = respell(resp.Headers)
		resp.MultiValueHeaders = respell(resp.MultiValueHeaders)
		return resp, nil
	}
	var httpAPI events.APIGatewayV2HTTPRequest
	httpAPIErr := json.Unmarshal(payload, &httpAPI)
	if httpAPIErr == nil && httpAPI.Version == "2.0" && httpAPI.RequestContext.HTTP.Method != "" {
		resp, err := l.httpAPI.ProxyWithContext(ctx, httpAPI)
		if err != nil {
			return l.malformed(ctx, fmt.Errorf("%w: HTTP API event: %w", ErrMalformedEvent, err)), nil
		}
		resp.Headers = respell(resp.Headers)
		resp.MultiValueHeaders = respell(resp.MultiValueHeaders)
		return resp, nil
	}
	if restErr == nil && httpAPIErr == nil {
		return l.malformed(ctx, fmt.Errorf("%w: neither httpMethod (REST, payload 1.0) nor version 2.0 with requestContext.http.method (HTTP API)", ErrMalformedEvent)), nil
	}
	return l.malformed(ctx, fmt.Errorf("%w: as REST: %v; as HTTP API: %v", ErrMalformedEvent, restErr, httpAPIErr)), nil
}

// malformedBody is the body of the answer to a malformed event.
const malformedBody = `{"error":{"code":"BAD_REQUEST","message":"The event is not an API Gateway proxy request this function can serve."}}`

func (l *LambdaHandler) malformed(ctx context.Context, err error) events.APIGatewayProxyResponse {
	l.logger.LogAttrs(ctx, slog.LevelError, "malformed event", slog.String("error", err.Error()))
	return events.APIGatewayProxyResponse{
		StatusCode: http.StatusBadRequest,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       malformedBody,
	}
}

// respell renames the rate-limit headers of a proxy response from Go's
// canonical form (Ratelimit-Policy) to SPEC's (RateLimit-Policy): API
// Gateway passes names through as the function spells them, and clients
// read the JSON map exactly.
func respell[V any](headers map[string]V) map[string]V {
	for name, v := range headers {
		if spec := ratelimit.SpecHeaderName(name); spec != name {
			delete(headers, name)
			headers[spec] = v
		}
	}
	return headers
}
