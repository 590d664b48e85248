package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// serveHTTPAPI answers a request as an HTTP API with one $default route:
// the simple-response authorizer (payload 2.0), then the Lambda proxy
// integration (payload 2.0). HTTP APIs have no gateway responses: their
// own errors are fixed {"message": ...} bodies.
func (g *Gateway) serveHTTPAPI(w http.ResponseWriter, r *http.Request, body []byte, ex *exchange) {
	stage := g.spec.Stage
	rawPath := "/" + stage + r.URL.EscapedPath()
	headers := v2Headers(r, ex.sourceIP)
	query := v2Query(r)
	cookies := r.Header.Values("Cookie")
	if len(cookies) > 0 {
		var split []string
		for _, c := range cookies {
			for _, part := range strings.Split(c, ";") {
				if p := strings.TrimSpace(part); p != "" {
					split = append(split, p)
				}
			}
		}
		cookies = split
	}
	now := time.Now()
	httpCtx := events.APIGatewayV2HTTPRequestContextHTTPDescription{
		Method:    r.Method,
		Path:      "/" + stage + r.URL.Path,
		Protocol:  r.Proto,
		SourceIP:  ex.sourceIP,
		UserAgent: r.UserAgent(),
	}
	stageVars := g.spec.HTTPStageVariables
	if len(stageVars) == 0 {
		stageVars = g.spec.StageVariables
	}

	// The template gives the HTTP API the same unauthenticated routes as
	// the REST API (GET /health, GET /v1/quota): they skip the authorizer.
	authorize := g.authorizer != nil
	if route, _, ok := g.spec.Match(r.Method, r.URL.Path); ok && !route.Authorized {
		authorize = false
	}
	// The same request context reaches the authorizer and the integration.
	requestContext := events.APIGatewayV2HTTPRequestContext{
		RouteKey:     "$default",
		AccountID:    localAccountID,
		Stage:        stage,
		RequestID:    ex.requestID,
		APIID:        localAPIID,
		DomainName:   r.Host,
		DomainPrefix: localAPIID,
		Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
		TimeEpoch:    now.UnixMilli(),
		HTTP:         httpCtx,
	}
	var lambdaContext map[string]any
	if authorize {
		event := events.APIGatewayV2CustomAuthorizerV2Request{
			Version:               "2.0",
			Type:                  "REQUEST",
			RouteArn:              methodARN(stage, r.Method, r.URL.Path),
			RouteKey:              "$default",
			RawPath:               rawPath,
			RawQueryString:        r.URL.RawQuery,
			Cookies:               cookies,
			Headers:               headers,
			QueryStringParameters: query,
			StageVariables:        stageVars,
			RequestContext:        requestContext,
		}
		out, err := invoke(r.Context(), g.authorizer, event)
		if err != nil {
			if err.Error() == errUnauthorized {
				ex.verdict = "Unauthorized"
				plainError(w, ex, http.StatusUnauthorized, "Unauthorized")
				return
			}
			ex.verdict = "error"
			g.logger.Warn("authorizer failed", "error", err.Error(), "request_id", ex.requestID)
			plainError(w, ex, http.StatusInternalServerError, "Internal Server Error")
			return
		}
		var resp events.APIGatewayV2CustomAuthorizerSimpleResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			ex.verdict = "invalid"
			plainError(w, ex, http.StatusInternalServerError, "Internal Server Error")
			return
		}
		if !resp.IsAuthorized {
			ex.verdict = "Deny"
			plainError(w, ex, http.StatusForbidden, "Forbidden")
			return
		}
		ex.verdict = "Allow"
		lambdaContext = resp.Context
	}

	text, base64Encoded := requestBody(body)
	event := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              "$default",
		RawPath:               rawPath,
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		StageVariables:        stageVars,
		RequestContext:        requestContext,
		Body:                  text,
		IsBase64Encoded:       base64Encoded,
	}
	if lambdaContext != nil {
		event.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: lambdaContext}
	}
	fn := g.functions[g.httpFunction]
	out, err := invoke(r.Context(), fn, event)
	if err != nil {
		g.logger.Error("function failed", "function", g.httpFunction, "error", err.Error(), "request_id", ex.requestID)
		plainError(w, ex, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	// Payload 2.0 lets a function return any JSON: without a statusCode
	// it is the body of a 200.
	var probe map[string]json.RawMessage
	if json.Unmarshal(out, &probe) != nil || probe["statusCode"] == nil {
		writeProxyResponse(w, ex, http.StatusOK, map[string]string{"Content-Type": "application/json"}, nil, nil, string(out), false)
		return
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode < 100 || resp.StatusCode > 599 {
		plainError(w, ex, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	writeProxyResponse(w, ex, resp.StatusCode, resp.Headers, resp.MultiValueHeaders, resp.Cookies, resp.Body, resp.IsBase64Encoded)
}

// v2Headers are an HTTP API event's headers: lower-case names, repeated
// values joined with commas, X-Forwarded-For extended by the peer address.
func v2Headers(r *http.Request, sourceIP string) map[string]string {
	out := make(map[string]string, len(r.Header)+2)
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") || len(vs) == 0 {
			continue
		}
		out[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	if r.Host != "" {
		out["host"] = r.Host
	}
	if prior := out["x-forwarded-for"]; prior != "" {
		out["x-forwarded-for"] = prior + ", " + sourceIP
	} else {
		out["x-forwarded-for"] = sourceIP
	}
	return out
}

func v2Query(r *http.Request) map[string]string {
	q := r.URL.Query()
	if len(q) == 0 {
		return nil
	}
	out := make(map[string]string, len(q))
	for k, vs := range q {
		out[k] = strings.Join(vs, ",")
	}
	return out
}
