package apihandler_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// FuzzAPIEvent drives the event-to-response path of the API function (event
// shape detection, the proxy adapters, the request reading, identity, the
// decision on a real redis-server, the middleware and the routes) with
// arbitrary methods, paths, source addresses, credentials and authorizer
// contexts, in REST and HTTP API events, plus arbitrary raw payloads. It
// never panics or errors; every answer is one of the API's statuses with a
// JSON body, and every 429 is the contract's.
func FuzzAPIEvent(f *testing.F) {
	srv := redistest.StartServer(f)
	api := apitest.Start(f, apitest.Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": "5/1m"}))

	f.Add(false, "GET", "/v1/items", "203.0.113.7", "", "", "", []byte(nil))
	f.Add(true, "GET", "/v1/items", "203.0.113.20", "", "", "", []byte(nil))
	f.Add(false, "POST", "/auth/login", "203.0.113.8", "", "", "", []byte(nil))
	f.Add(false, "GET", "/v1/quota", "2001:db8::1", apitest.KnownKey, "", "", []byte(nil))
	f.Add(true, "GET", "/v1/items", "203.0.113.7", "forged", "Bearer a.b.c", "", []byte(nil))
	f.Add(false, "GET", "/v1/items", "203.0.113.7", "", "", `{"tier":"org","limit":"10000","remaining":"5","reset":"3","window":"60","name":"org"}`, []byte(nil))
	f.Add(true, "GET", "/v1/items", "203.0.113.7", "", "", `{"tier":"anonymous","limit":30,"remaining":0,"reset":9,"window":60,"retryAfter":-4}`, []byte(nil))
	f.Add(false, "get", "//v1/../items/", "{x}", "\x00", "Bearer \r\n", `{"limit":1e400}`, []byte(nil))
	for _, name := range []string{"api-rest-anonymous.json", "api-httpapi-v2.json", "api-malformed.json", "api-rest-with-authorizer-context.json"} {
		f.Add(false, "", "", "", "", "", "", apitest.ReadEvent(f, name))
	}

	f.Fuzz(func(t *testing.T, v2 bool, method, path, sourceIP, apiKey, authorization, authorizer string, raw []byte) {
		payload := raw
		if len(raw) == 0 {
			var ctx map[string]any
			_ = json.Unmarshal([]byte(authorizer), &ctx) // not an object: no authorizer
			payload = apiFuzzEvent(t, v2, method, path, sourceIP, apiKey, authorization, ctx)
		}
		resp := apitest.Invoke(t, api, payload)
		switch resp.StatusCode {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound,
			http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			t.Fatalf("status %d; body %.300s", resp.StatusCode, resp.Body)
		}
		if !json.Valid([]byte(resp.Body)) {
			t.Fatalf("status %d with a body that is not JSON: %.300s", resp.StatusCode, resp.Body)
		}
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			apitest.Check429(t, resp)
		case http.StatusUnauthorized:
			apitest.CheckRateLimitHeaders(t, resp)
		}
	})
}

// apiFuzzEvent is a REST or HTTP API event made of fuzzed parts; no
// validation, so odd parts reach the function as API Gateway never sends
// them.
func apiFuzzEvent(t *testing.T, v2 bool, method, path, sourceIP, apiKey, authorization string, authorizer map[string]any) []byte {
	headers := map[string]string{"x-forwarded-for": "198.51.100.1"}
	if apiKey != "" {
		headers["x-api-key"] = apiKey
	}
	if authorization != "" {
		headers["authorization"] = authorization
	}
	if v2 {
		return apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.HTTP.Method, e.RawPath, e.RequestContext.HTTP.Path = method, path, path
			e.RequestContext.HTTP.SourceIP = sourceIP
			e.Headers = headers
			if authorizer != nil {
				e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: authorizer}
			}
		})
	}
	return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
		e.HTTPMethod, e.Path, e.Resource = method, path, path
		e.RequestContext.Identity.SourceIP = sourceIP
		e.Headers, e.MultiValueHeaders = nil, nil
		for k, v := range headers {
			apitest.SetRESTHeader(e, k, v)
		}
		e.RequestContext.Authorizer = authorizer
	})
}
