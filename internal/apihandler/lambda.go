package apihandler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
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

// NewLambdaHandler wraps h. logger receives one record per malformed event,
// within the default observe.LogSampling budget (a caller can send malformed
// requests in a flood); slog.Default() when nil.
func NewLambdaHandler(h http.Handler, logger *slog.Logger) *LambdaHandler {
	if logger == nil {
		logger = slog.Default()
	}
	logger = slog.New(observe.SampledHandler(logger.Handler(), observe.LogSampling{}))
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
		// The proxy library builds the query string itself, escaped.
		if err := eventRequestError(rest.HTTPMethod, rest.RequestContext.DomainName, rest.Path, ""); err != nil {
			return l.malformed(ctx, fmt.Errorf("%w: REST event: %w", ErrMalformedEvent, err)), nil
		}
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
		path := httpAPI.RawPath
		if path == "" {
			path = httpAPI.RequestContext.HTTP.Path
		}
		if err := eventRequestError(httpAPI.RequestContext.HTTP.Method, httpAPI.RequestContext.DomainName, path, httpAPI.RawQueryString); err != nil {
			return l.malformed(ctx, fmt.Errorf("%w: HTTP API event: %w", ErrMalformedEvent, err)), nil
		}
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

// eventRequestError reports whether the proxy library could turn an
// event's method, domain, path and raw query string into an HTTP request,
// checked before the library tries: it prints its failures on standard
// output as plain text, not JSON, and its URL error quotes the whole URL,
// whose query string may carry a token or a key. The error returned here
// quotes at most the offending characters. It builds the URL as the
// library does (core.CustomHostVariable replaces the domain).
func eventRequestError(method, domain, path, rawQuery string) error {
	if method == "" || strings.IndexFunc(method, notTokenChar) >= 0 {
		return errors.New("the request method is not an HTTP token")
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	server := "https://" + domain
	if custom, ok := os.LookupEnv(core.CustomHostVariable); ok {
		server = custom
	}
	u := server + path
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	if _, err := url.Parse(u); err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			return fmt.Errorf("the request URL does not parse: %w", ue.Err)
		}
		return errors.New("the request URL does not parse")
	}
	return nil
}

// notTokenChar reports whether r may not appear in an HTTP method (a
// token, RFC 9110 section 5.6.2), the check net/http makes.
func notTokenChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

func (l *LambdaHandler) malformed(ctx context.Context, err error) events.APIGatewayProxyResponse {
	attrs := []slog.Attr{slog.String("error", err.Error())}
	if id := apigw.LambdaRequestID(ctx); id != "" {
		attrs = append(attrs, slog.String("lambdaRequestId", id))
	}
	l.logger.LogAttrs(ctx, slog.LevelError, "malformed event", attrs...)
	return events.APIGatewayProxyResponse{
		StatusCode: http.StatusBadRequest,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       malformedBody,
	}
}

// respell renames the rate-limit headers of a proxy response from Go's
// canonical form (Ratelimit-Policy) to docs/contract.md's (RateLimit-Policy): API
// Gateway passes names through as the function spells them, and clients
// read the JSON map exactly.
func respell[V any](headers map[string]V) map[string]V {
	for name, v := range headers {
		if spec := contract.SpecHeaderName(name); spec != name {
			delete(headers, name)
			headers[spec] = v
		}
	}
	return headers
}
