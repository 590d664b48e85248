package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/deployconfig"
)

// serveREST answers a request as a REST API: route match, the REQUEST
// authorizer and its policy, then the Lambda proxy integration.
func (g *Gateway) serveREST(w http.ResponseWriter, r *http.Request, body []byte, ex *exchange) {
	route, params, ok := g.spec.Match(r.Method, r.URL.Path)
	if !ok {
		g.gatewayResponse(w, r, ex, ResponseMissingAuthToken, nil)
		return
	}
	headers, multiHeaders := restHeaders(r, ex.sourceIP)
	query, multiQuery := restQuery(r)
	now := time.Now()
	rc := events.APIGatewayProxyRequestContext{
		AccountID:        localAccountID,
		ResourceID:       "local",
		Stage:            g.spec.Stage,
		RequestID:        ex.requestID,
		Identity:         events.APIGatewayRequestIdentity{SourceIP: ex.sourceIP, UserAgent: r.UserAgent()},
		ResourcePath:     route.Resource,
		HTTPMethod:       r.Method,
		RequestTime:      now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
		RequestTimeEpoch: now.UnixMilli(),
		APIID:            localAPIID,
		Path:             "/" + g.spec.Stage + r.URL.Path,
		Protocol:         r.Proto,
		DomainName:       r.Host,
	}

	text, base64Encoded := requestBody(body)
	event := events.APIGatewayProxyRequest{
		Resource:                        route.Resource,
		Path:                            r.URL.Path,
		HTTPMethod:                      r.Method,
		Headers:                         headers,
		MultiValueHeaders:               multiHeaders,
		QueryStringParameters:           query,
		MultiValueQueryStringParameters: multiQuery,
		PathParameters:                  params,
		StageVariables:                  g.spec.StageVariables,
		RequestContext:                  rc,
		Body:                            text,
		IsBase64Encoded:                 base64Encoded,
	}
	if route.Authorized && g.spec.HasAuthorizer {
		authorizerContext, done := g.authorizeREST(w, r, ex, event)
		if done {
			return
		}
		event.RequestContext.Authorizer = authorizerContext
	}
	out, err := invoke(r.Context(), g.functions[route.Function], event)
	if err != nil {
		g.logger.Error("function failed", "function", route.Function, "error", err.Error(), "request_id", ex.requestID)
		plainError(w, ex, http.StatusBadGateway, "Internal server error")
		return
	}
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode < 100 || resp.StatusCode > 599 {
		g.logger.Error("malformed Lambda proxy response", "function", route.Function, "request_id", ex.requestID)
		plainError(w, ex, http.StatusBadGateway, "Internal server error")
		return
	}
	writeProxyResponse(w, ex, resp.StatusCode, resp.Headers, resp.MultiValueHeaders, nil, resp.Body, resp.IsBase64Encoded)
}

// authorizeREST runs the REQUEST authorizer on the request the integration
// would get (its route, headers, query, path parameters and context). It
// returns the context to pass to the integration, or done when it has
// already answered.
func (g *Gateway) authorizeREST(w http.ResponseWriter, r *http.Request, ex *exchange, req events.APIGatewayProxyRequest) (map[string]any, bool) {
	// A missing identity source is a 401 before the authorizer runs.
	for _, h := range g.spec.IdentityHeaders {
		if r.Header.Get(h) == "" {
			ex.verdict = "missing identity source"
			g.gatewayResponse(w, r, ex, ResponseUnauthorized, nil)
			return nil, true
		}
	}
	for _, q := range g.spec.IdentityQueryStrings {
		if r.URL.Query().Get(q) == "" {
			ex.verdict = "missing identity source"
			g.gatewayResponse(w, r, ex, ResponseUnauthorized, nil)
			return nil, true
		}
	}
	arn := methodARN(g.spec.Stage, r.Method, r.URL.Path)
	rc := req.RequestContext
	event := events.APIGatewayCustomAuthorizerRequestTypeRequest{
		Type:                            "REQUEST",
		MethodArn:                       arn,
		Resource:                        req.Resource,
		Path:                            req.Path,
		HTTPMethod:                      req.HTTPMethod,
		Headers:                         req.Headers,
		MultiValueHeaders:               req.MultiValueHeaders,
		QueryStringParameters:           req.QueryStringParameters,
		MultiValueQueryStringParameters: req.MultiValueQueryStringParameters,
		PathParameters:                  req.PathParameters,
		StageVariables:                  req.StageVariables,
		RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{
			Path:         rc.Path,
			AccountID:    rc.AccountID,
			ResourceID:   rc.ResourceID,
			Stage:        rc.Stage,
			RequestID:    rc.RequestID,
			Identity:     events.APIGatewayCustomAuthorizerRequestTypeRequestIdentity{SourceIP: rc.Identity.SourceIP},
			ResourcePath: rc.ResourcePath,
			HTTPMethod:   rc.HTTPMethod,
			APIID:        rc.APIID,
		},
	}
	started := time.Now()
	out, err := invoke(r.Context(), g.authorizer, event)
	latency := time.Since(started)
	if err != nil {
		if err.Error() == errUnauthorized {
			ex.verdict = "Unauthorized"
			g.gatewayResponse(w, r, ex, ResponseUnauthorized, nil)
			return nil, true
		}
		ex.verdict = "error"
		g.logger.Warn("authorizer failed", "error", err.Error(), "request_id", ex.requestID)
		g.gatewayResponse(w, r, ex, ResponseAuthorizerFailure, nil)
		return nil, true
	}
	resp, err := parseAuthorizerResponse(out)
	if err != nil {
		ex.verdict = "invalid"
		g.logger.Error("invalid authorizer response", "error", err.Error(), "request_id", ex.requestID)
		g.gatewayResponse(w, r, ex, ResponseAuthorizerConfig, nil)
		return nil, true
	}
	if !resp.allows(arn) {
		ex.verdict = "Deny"
		g.gatewayResponse(w, r, ex, ResponseAccessDenied, resp.Context)
		return nil, true
	}
	ex.verdict = "Allow"
	// The integration sees the context with string values, the principal
	// and the authorizer's latency, as REST APIs pass them.
	ctx := make(map[string]any, len(resp.Context)+2)
	for k, v := range resp.Context {
		ctx[k] = deployconfig.Stringify(v)
	}
	ctx["principalId"] = resp.PrincipalID
	ctx["integrationLatency"] = latency.Milliseconds()
	return ctx, false
}

// authorizerResponse is a REST authorizer's answer; Action and Resource may
// be a string or a list, as IAM allows.
type authorizerResponse struct {
	PrincipalID    string `json:"principalId"`
	PolicyDocument struct {
		Version   string `json:"Version"`
		Statement []struct {
			Effect   string          `json:"Effect"`
			Action   json.RawMessage `json:"Action"`
			Resource json.RawMessage `json:"Resource"`
		} `json:"Statement"`
	} `json:"policyDocument"`
	Context            map[string]any `json:"context"`
	UsageIdentifierKey string         `json:"usageIdentifierKey"`
}

// parseAuthorizerResponse checks what API Gateway checks: a principal, a
// policy, and a context of strings, numbers and booleans only.
func parseAuthorizerResponse(out []byte) (*authorizerResponse, error) {
	var resp authorizerResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if resp.PrincipalID == "" {
		return nil, errors.New("no principalId")
	}
	if len(resp.PolicyDocument.Statement) == 0 {
		return nil, errors.New("no policy statement")
	}
	for k, v := range resp.Context {
		switch v.(type) {
		case string, float64, bool:
		default:
			return nil, fmt.Errorf("context %q: %T is not a string, number or boolean", k, v)
		}
	}
	return &resp, nil
}

// allows evaluates the policy for the request's method ARN: an explicit
// Deny wins, otherwise an Allow is needed.
func (a *authorizerResponse) allows(arn string) bool {
	allowed := false
	for _, st := range a.PolicyDocument.Statement {
		if !matchesAny(stringOrList(st.Action), "execute-api:Invoke") || !matchesAny(stringOrList(st.Resource), arn) {
			continue
		}
		switch st.Effect {
		case "Deny":
			return false
		case "Allow":
			allowed = true
		}
	}
	return allowed
}

func stringOrList(raw json.RawMessage) []string {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(raw, &many)
	return many
}

// matchesAny reports whether value matches one of the IAM patterns (* and
// ? wildcards; path.Match treats / specially, so it is replaced first).
func matchesAny(patterns []string, value string) bool {
	safe := strings.ReplaceAll(value, "/", "\x00")
	for _, p := range patterns {
		if p == value {
			return true
		}
		if ok, err := path.Match(escapeBrackets(strings.ReplaceAll(p, "/", "\x00")), safe); err == nil && ok {
			return true
		}
	}
	return false
}

func escapeBrackets(p string) string {
	return strings.NewReplacer(`[`, `\[`, `]`, `\]`, `\`, `\\`).Replace(p)
}

// restHeaders are the event's headers: single values (the last one of a
// repeated header) and all values, with X-Forwarded-For extended by the
// peer address as API Gateway extends it (the functions never trust it).
func restHeaders(r *http.Request, sourceIP string) (map[string]string, map[string][]string) {
	single := make(map[string]string, len(r.Header)+2)
	multi := make(map[string][]string, len(r.Header)+2)
	for k, vs := range r.Header {
		if len(vs) == 0 {
			continue
		}
		single[k] = vs[len(vs)-1]
		multi[k] = append([]string(nil), vs...)
	}
	if r.Host != "" {
		single["Host"] = r.Host
		multi["Host"] = []string{r.Host}
	}
	xff := sourceIP
	if prior := r.Header.Get("X-Forwarded-For"); prior != "" {
		xff = prior + ", " + sourceIP
	}
	single["X-Forwarded-For"] = xff
	multi["X-Forwarded-For"] = []string{xff}
	return single, multi
}

func restQuery(r *http.Request) (map[string]string, map[string][]string) {
	q := r.URL.Query()
	if len(q) == 0 {
		return nil, nil
	}
	single := make(map[string]string, len(q))
	multi := make(map[string][]string, len(q))
	for k, vs := range q {
		if len(vs) == 0 {
			continue
		}
		single[k] = vs[len(vs)-1]
		multi[k] = vs
	}
	return single, multi
}
