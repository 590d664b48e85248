package apihandler_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// These tests drive the API function in-process, exactly as its main wires
// it (Runtime, handler, Lambda entry point, aws-lambda-go-api-proxy
// adapters), with real v1 and v2 events against a real redis-server.

// TestAPIAnonymousLimitOnRESTAndHTTPAPI: from one source IP the limit is
// admitted with exact, counting-down contract headers, and the limit+1th request
// is a contract 429, whatever X-Forwarded-For says.
func TestAPIAnonymousLimitOnRESTAndHTTPAPI(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": "3/1m"}))

	shapes := []struct {
		name  string
		event func(xff string) []byte
	}{
		{"REST v1", func(xff string) []byte {
			return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
				e.RequestContext.Identity.SourceIP = "203.0.113.101"
				apitest.SetRESTHeader(e, "X-Forwarded-For", xff)
			})
		}},
		{"HTTP API v2", func(xff string) []byte {
			return apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
				e.RequestContext.HTTP.SourceIP = "203.0.113.102"
				e.Headers["x-forwarded-for"] = xff
			})
		}},
		{"HTTP API v2 on a named stage", func(xff string) []byte {
			return apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
				e.RequestContext.HTTP.SourceIP = "203.0.113.103"
				e.RequestContext.Stage = "prod"
				e.RawPath = "/prod/v1/items"
				e.RequestContext.HTTP.Path = "/prod/v1/items"
				e.Headers["x-forwarded-for"] = xff
			})
		}},
	}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			for i := range 3 {
				// A new X-Forwarded-For every time: if it were trusted,
				// every request would be a new caller.
				resp := apitest.Invoke(t, api, shape.event(fmt.Sprintf("198.51.100.%d", i+1)))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d, body %s", i+1, resp.StatusCode, resp.Body)
				}
				if !strings.Contains(resp.Body, `"items"`) {
					t.Fatalf("request %d did not reach GET /v1/items: %s", i+1, resp.Body)
				}
				apitest.CheckRateLimitHeaders(t, resp)
				want := map[string]string{
					"RateLimit-Policy":      `"anonymous";q=3;w=60`,
					"RateLimit-Limit":       "3",
					"RateLimit-Remaining":   strconv.Itoa(2 - i),
					"X-RateLimit-Remaining": strconv.Itoa(2 - i),
					"Retry-After":           "",
				}
				for name, v := range want {
					if got := resp.Header.Get(name); got != v {
						t.Errorf("request %d: %s = %q, want %q", i+1, name, got, v)
					}
				}
				reset, _ := strconv.ParseInt(resp.Header.Get("RateLimit-Reset"), 10, 64)
				xreset, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
				// A sliding window is entirely unused again at most two
				// windows after its last spend.
				if reset < 1 || reset > 120 || xreset < time.Now().Unix() {
					t.Errorf("request %d: RateLimit-Reset %d, X-RateLimit-Reset %d", i+1, reset, xreset)
				}
			}
			apitest.Check429(t, apitest.Invoke(t, api, shape.event("198.51.100.200")))
		})
	}
}

// TestAPIReusesTheAuthorizerDecision: when the authorizer's context is in
// the event, its decision makes the headers (or the 429, or the 503 of a
// fail-closed route it could not decide) and Redis is not touched: nothing
// is counted twice.
func TestAPIReusesTheAuthorizerDecision(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), nil))

	httpAPIWith := func(ctx map[string]any) []byte {
		return apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: ctx}
		})
	}
	tests := []struct {
		name        string
		event       []byte
		wantStatus  int
		wantHeaders map[string]string
	}{
		{
			name:       "REST, context values as strings (events/api-rest-with-authorizer-context.json)",
			event:      apitest.ReadEvent(t, "api-rest-with-authorizer-context.json"),
			wantStatus: http.StatusOK,
			wantHeaders: map[string]string{
				"RateLimit-Policy":      `"org";q=10000;w=60`,
				"RateLimit":             `"org";r=9876;t=41`,
				"RateLimit-Remaining":   "9876",
				"RateLimit-Reset":       "41",
				"X-RateLimit-Reset":     "1795986041",
				"X-RateLimit-Remaining": "9876",
			},
		},
		{
			name: "HTTP API, typed context values",
			event: httpAPIWith(map[string]any{
				"tier": "user", "limit": 600, "remaining": 599, "reset": 1, "window": 60,
				"name": "user", "policy": `"user";q=600;w=60`, "resetAt": 1795986001,
			}),
			wantStatus: http.StatusOK,
			wantHeaders: map[string]string{
				"RateLimit-Policy":  `"user";q=600;w=60`,
				"RateLimit":         `"user";r=599;t=1`,
				"X-RateLimit-Reset": "1795986001",
			},
		},
		{
			name: "HTTP API, a denial in the context: 429 from it, not from Redis",
			event: httpAPIWith(map[string]any{
				"tier": "anonymous", "limit": 30, "remaining": 0, "reset": 18, "window": 60,
				"name": "anonymous", "retryAfter": 18, "resetAt": 1795986018,
			}),
			wantStatus:  http.StatusTooManyRequests,
			wantHeaders: map[string]string{"Retry-After": "18", "RateLimit": `"anonymous";r=0;t=18`},
		},
		{
			name:        "HTTP API, the authorizer could not decide a fail-closed route: 503 from the context (events/api-httpapi-v2-unavailable.json)",
			event:       apitest.ReadEvent(t, "api-httpapi-v2-unavailable.json"),
			wantStatus:  http.StatusServiceUnavailable,
			wantHeaders: map[string]string{"Retry-After": "1", "RateLimit": ""},
		},
		{
			name: "HTTP API, unavailable as a string on another route: 503 too",
			event: apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
				e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{
					"tier": "org", "unavailable": "true", "retryAfter": "1",
				}}
			}),
			wantStatus:  http.StatusServiceUnavailable,
			wantHeaders: map[string]string{"Retry-After": "1", "RateLimit": ""},
		},
	}
	before := apitest.RedisKeyCount(t, srv)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 5 {
				resp := apitest.Invoke(t, api, tt.event)
				if resp.StatusCode != tt.wantStatus {
					t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.wantStatus, resp.Body)
				}
				switch resp.StatusCode {
				case http.StatusTooManyRequests:
					apitest.Check429(t, resp)
				case http.StatusServiceUnavailable:
					if resp.Body != string(contract.ServiceUnavailableBody(1)) {
						t.Fatalf("503 body %s", resp.Body)
					}
				default:
					apitest.CheckRateLimitHeaders(t, resp)
				}
				for name, want := range tt.wantHeaders {
					if got := resp.Header.Get(name); got != want {
						t.Errorf("%s = %q, want %q", name, got, want)
					}
				}
			}
		})
	}
	if after := apitest.RedisKeyCount(t, srv); after != before {
		t.Fatalf("Redis went from %d to %d keys: the authorizer's decision was counted again", before, after)
	}

	// The same event without the context is counted: the key count moves,
	// which shows the assertion above can fail.
	apitest.Invoke(t, api, apitest.ReadEvent(t, "api-rest-anonymous.json"))
	if after := apitest.RedisKeyCount(t, srv); after == before {
		t.Fatal("a request without the authorizer's context was not counted")
	}
}

// TestAPIRoutes pins down each example route: health is not limited, the
// quota spends nothing and answers even when exhausted, login has its own
// strict limit, unknown keys are 401 and counted, unknown routes are 404
// and counted.
func TestAPIRoutes(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": "4/1m"}))

	at := func(ip, method, path string, edit ...func(*events.APIGatewayProxyRequest)) []byte {
		return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.RequestContext.Identity.SourceIP = ip
			e.HTTPMethod, e.Path, e.Resource = method, path, path
			for _, f := range edit {
				f(e)
			}
		})
	}

	t.Run("GET /health is not limited", func(t *testing.T) {
		for range 10 {
			resp := apitest.Invoke(t, api, at("203.0.113.110", "GET", "/health"))
			if resp.StatusCode != http.StatusOK || resp.Body != `{"status":"ok"}` {
				t.Fatalf("health: %d %s", resp.StatusCode, resp.Body)
			}
			if resp.Header.Get("RateLimit") != "" {
				t.Fatalf("health carries rate-limit headers: %v", resp.Header)
			}
		}
		// Nothing was counted for that IP.
		resp := apitest.Invoke(t, api, at("203.0.113.110", "GET", "/v1/items"))
		if got := resp.Header.Get("RateLimit-Remaining"); got != "3" {
			t.Fatalf("after 10 health checks the first item request has %s remaining, want 3", got)
		}
	})

	t.Run("GET /v1/quota spends nothing and answers when exhausted", func(t *testing.T) {
		ip := "203.0.113.111"
		quota := func() (apitest.Response, struct {
			Limits []struct {
				Name          string `json:"name"`
				Limit         int64  `json:"limit"`
				WindowSeconds int64  `json:"window_seconds"`
				Remaining     int64  `json:"remaining"`
				ResetSeconds  int64  `json:"reset_seconds"`
			} `json:"limits"`
			Degraded bool `json:"degraded"`
		}) {
			resp := apitest.Invoke(t, api, at(ip, "GET", "/v1/quota"))
			var body struct {
				Limits []struct {
					Name          string `json:"name"`
					Limit         int64  `json:"limit"`
					WindowSeconds int64  `json:"window_seconds"`
					Remaining     int64  `json:"remaining"`
					ResetSeconds  int64  `json:"reset_seconds"`
				} `json:"limits"`
				Degraded bool `json:"degraded"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
				t.Fatalf("quota body %q: %v", resp.Body, err)
			}
			return resp, body
		}
		for spent := range 4 {
			for range 2 { // asking twice changes nothing
				resp, body := quota()
				if resp.StatusCode != http.StatusOK || len(body.Limits) != 1 {
					t.Fatalf("quota: %d %s", resp.StatusCode, resp.Body)
				}
				l := body.Limits[0]
				if l.Name != "anonymous" || l.Limit != 4 || l.WindowSeconds != 60 || l.Remaining != int64(4-spent) || body.Degraded {
					t.Fatalf("after %d spent, quota says %+v", spent, body)
				}
				if resp.Header.Get("RateLimit-Remaining") != strconv.Itoa(4-spent) {
					t.Fatalf("quota header remaining %q after %d spent", resp.Header.Get("RateLimit-Remaining"), spent)
				}
			}
			if resp := apitest.Invoke(t, api, at(ip, "GET", "/v1/items")); resp.StatusCode != http.StatusOK {
				t.Fatalf("item request %d: %d", spent+1, resp.StatusCode)
			}
		}
		apitest.Check429(t, apitest.Invoke(t, api, at(ip, "GET", "/v1/items")))
		resp, body := quota()
		if resp.StatusCode != http.StatusOK || body.Limits[0].Remaining != 0 || resp.Header.Get("Retry-After") != "" {
			t.Fatalf("exhausted quota: %d, %s, Retry-After %q", resp.StatusCode, resp.Body, resp.Header.Get("Retry-After"))
		}
		apitest.CheckRateLimitHeaders(t, resp)
	})

	t.Run("an unknown API key is 401 and counted against the IP", func(t *testing.T) {
		ip := "203.0.113.112"
		for i := range 4 {
			resp := apitest.Invoke(t, api, at(ip, "GET", "/v1/items", func(e *events.APIGatewayProxyRequest) {
				apitest.SetRESTHeader(e, "x-api-key", fmt.Sprintf("forged-key-%d", i))
			}))
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Body, `"UNAUTHORIZED"`) {
				t.Fatalf("forged key %d: %d %s", i, resp.StatusCode, resp.Body)
			}
			apitest.CheckRateLimitHeaders(t, resp)
			if got := resp.Header.Get("RateLimit-Policy"); got != `"anonymous";q=4;w=60` {
				t.Fatalf("forged key counted under %q", got)
			}
		}
		apitest.Check429(t, apitest.Invoke(t, api, at(ip, "GET", "/v1/items", func(e *events.APIGatewayProxyRequest) {
			apitest.SetRESTHeader(e, "x-api-key", "forged-key-last")
		})))
		// And the known key is its own, bigger bucket.
		resp := apitest.Invoke(t, api, at(ip, "GET", "/v1/items", func(e *events.APIGatewayProxyRequest) {
			apitest.SetRESTHeader(e, "x-api-key", apitest.KnownKey)
		}))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Policy") != `"org";q=10000;w=60` {
			t.Fatalf("known key: %d, policy %q", resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
		}
	})

	t.Run("an unknown route is 404 and counted", func(t *testing.T) {
		resp := apitest.Invoke(t, api, at("203.0.113.113", "GET", "/wp-login.php"))
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("RateLimit-Remaining") != "3" {
			t.Fatalf("unknown route: %d, remaining %q, %s", resp.StatusCode, resp.Header.Get("RateLimit-Remaining"), resp.Body)
		}
	})
}

// TestAPIQuotaIsNoFreeKeyCheck: GET /v1/quota spends nothing for a caller
// with no credential or a valid one, but 50 random API keys asking it from
// one address are counted against the address's anonymous limit, logged,
// and answered exactly as on GET /v1/items: 401 within the limit, then 429.
// Otherwise the quota would test keys for free.
func TestAPIQuotaIsNoFreeKeyCheck(t *testing.T) {
	srv := redistest.StartServer(t)
	const limit, sprayed = 30, 50
	var logs bytes.Buffer
	api := apitest.StartLogging(t, apitest.Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": fmt.Sprintf("%d/1m", limit)}), &logs)

	statuses := func(ip, path string) []int {
		got := make([]int, sprayed)
		for i := range sprayed {
			resp := apitest.Invoke(t, api, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
				e.RequestContext.Identity.SourceIP = ip
				e.Path, e.Resource = path, path
				apitest.SetRESTHeader(e, "x-api-key", randomAPIKey(t))
			}))
			got[i] = resp.StatusCode
			switch {
			case i < limit && resp.StatusCode == http.StatusUnauthorized:
				apitest.CheckRateLimitHeaders(t, resp)
				if got := resp.Header.Get("RateLimit-Remaining"); got != strconv.Itoa(limit-1-i) {
					t.Fatalf("%s request %d: RateLimit-Remaining %s, want %d", path, i+1, got, limit-1-i)
				}
			case i >= limit && resp.StatusCode == http.StatusTooManyRequests:
				apitest.Check429(t, resp)
			default:
				t.Fatalf("%s request %d with a made-up credential: status %d, want %s; %s",
					path, i+1, resp.StatusCode, map[bool]string{true: "401", false: "429"}[i < limit], resp.Body)
			}
		}
		return got
	}
	quota := statuses("203.0.113.120", "/v1/quota")
	quotaOutput := logs.String()
	items := statuses("203.0.113.121", "/v1/items")
	if !slices.Equal(quota, items) {
		t.Fatalf("GET /v1/quota answered %v, GET /v1/items %v", quota, items)
	}

	// The spray on the quota spent the address's budget: its clean requests
	// are denied, and its quota (still free) shows the limit spent.
	apitest.Check429(t, apitest.Invoke(t, api, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
		e.RequestContext.Identity.SourceIP = "203.0.113.120"
	})))
	for range 3 {
		resp := apitest.Invoke(t, api, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.RequestContext.Identity.SourceIP = "203.0.113.120"
			e.Path, e.Resource = "/v1/quota", "/v1/quota"
		}))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Remaining") != "0" {
			t.Fatalf("the sprayer's clean quota: %d, remaining %q", resp.StatusCode, resp.Header.Get("RateLimit-Remaining"))
		}
	}

	// Every sprayed quota request is a decision like any other: counted in
	// the metrics (one rejected record each), and logged (within the log
	// budget, which a spray of this size does not exceed).
	var counted, logged int
	for _, line := range strings.Split(quotaOutput, "\n") {
		if strings.Contains(line, `"_aws"`) && strings.Contains(line, `"outcome":"rejected"`) {
			counted++
		}
		if strings.Contains(line, `"msg":"rate limit decision"`) && strings.Contains(line, `"route":"GET /v1/quota"`) && strings.Contains(line, `"unauthorized":true`) {
			logged++
		}
	}
	if counted != sprayed {
		t.Errorf("%d of %d unauthorized quota requests were counted as rejected decisions", counted, sprayed)
	}
	if logged != min(sprayed, observe.DefaultLogBurst) {
		t.Errorf("%d of %d unauthorized quota requests were logged as decisions", logged, sprayed)
	}
}

// randomAPIKey is a key nobody was ever given.
func randomAPIKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestAPICredentialsSurviveManyHeaders: a request with far more headers
// than the function keeps still has its API key read, every time: an
// unknown key with 200 padding headers is a 401, never a 200 as an
// anonymous caller.
func TestAPICredentialsSurviveManyHeaders(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), nil))
	for try := range 40 {
		resp := apitest.Invoke(t, api, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.RequestContext.Identity.SourceIP = fmt.Sprintf("203.0.113.%d", 130+try%10)
			for i := range 200 {
				apitest.SetRESTHeader(e, fmt.Sprintf("X-Pad-%03d", i), "x")
			}
			apitest.SetRESTHeader(e, "x-api-key", "unknown-key")
		}))
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("try %d: status %d, want 401; %s", try+1, resp.StatusCode, resp.Body)
		}
	}
}

// TestAPILoginRouteLimit: with the default configuration, POST /auth/login
// is held at its route limit (POST /auth/*=5/1m), well below the anonymous
// tier's 30/1m, and the headers name the route limit.
func TestAPILoginRouteLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), nil))
	login := apitest.ReadEvent(t, "api-login.json")
	for i := range 5 {
		resp := apitest.Invoke(t, api, login)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, "Login accepted") {
			t.Fatalf("login %d: %d %s", i+1, resp.StatusCode, resp.Body)
		}
		apitest.CheckRateLimitHeaders(t, resp)
		if got, want := resp.Header.Get("RateLimit"), fmt.Sprintf(`"POST /auth/*";r=%d;t=`, 4-i); !strings.HasPrefix(got, want) {
			t.Fatalf("login %d: RateLimit %q, want %s...", i+1, got, want)
		}
	}
	resp := apitest.Invoke(t, api, login)
	apitest.Check429(t, resp)
	// Both policies apply; RateLimit names the route limit, which denied.
	if got := resp.Header.Get("RateLimit-Policy"); got != `"anonymous";q=30;w=60, "POST /auth/*";q=5;w=60` {
		t.Fatalf("429 RateLimit-Policy %q", got)
	}
	// The tier limit of the same caller is untouched by the denial and
	// still far from denying: an ordinary route passes.
	items := apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { e.RequestContext.Identity.SourceIP = "203.0.113.8" })
	if resp := apitest.Invoke(t, api, items); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Remaining") != "24" {
		t.Fatalf("items after login flood: %d, remaining %q", resp.StatusCode, resp.Header.Get("RateLimit-Remaining"))
	}
}

// TestAPIMalformedAndHostileEvents: nothing an event holds panics the
// function; what cannot be served is a logged 400 with a JSON body, and the
// rest is answered like any request.
func TestAPIMalformedAndHostileEvents(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), nil))

	huge := strings.Repeat("A", 1<<20)
	tests := []struct {
		name       string
		event      []byte
		wantStatus int
	}{
		{"events/api-malformed.json", apitest.ReadEvent(t, "api-malformed.json"), http.StatusBadRequest},
		{"not JSON", []byte("GET / HTTP/1.1"), http.StatusBadRequest},
		{"JSON null", []byte("null"), http.StatusBadRequest},
		{"JSON array", []byte("[1,2]"), http.StatusBadRequest},
		{"empty object", []byte("{}"), http.StatusBadRequest},
		{"empty payload", []byte(""), http.StatusBadRequest},
		{"version 2.0 without requestContext.http", []byte(`{"version":"2.0","rawPath":"/v1/items"}`), http.StatusBadRequest},
		{"REST method with a space", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { e.HTTPMethod = "GE T" }), http.StatusBadRequest},
		{"REST bad base64 body", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { e.Body, e.IsBase64Encoded = "!!!", true }), http.StatusBadRequest},
		{"domain name that breaks the URL", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { e.RequestContext.DomainName = "bad host/%zz" }), http.StatusBadRequest},
		{"no request context: counted under an empty source", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.RequestContext = events.APIGatewayProxyRequestContext{}
		}), http.StatusOK},
		{"huge header value", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { apitest.SetRESTHeader(e, "X-Huge", huge) }), http.StatusOK},
		{"huge API key", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { apitest.SetRESTHeader(e, "x-api-key", huge) }), http.StatusUnauthorized},
		{"control characters in the path", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { e.Path = "/v1/\x00\r\n\"items" }), http.StatusBadRequest},
		{"odd but valid characters in the path", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { e.Path = "/v1/\u00e9/{x}/%41/items;x=1" }), http.StatusNotFound},
		{"odd characters in the source IP", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.RequestContext.Identity.SourceIP = "{tag}\u00e9\x00 " + huge[:300]
		}), http.StatusOK},
		{"HTTP API with no headers at all", apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) { e.Headers = nil }), http.StatusOK},
		{"HTTP API bearer token that is not a JWT", apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
			e.Headers["authorization"] = "Bearer \x01not-a-jwt"
		}), http.StatusOK},
		{"authorizer context of the wrong types", apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.RequestContext.Authorizer = map[string]any{"limit": []any{1}, "remaining": map[string]any{}, "tier": 7}
		}), http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := apitest.Invoke(t, api, tt.event)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %.300s", resp.StatusCode, tt.wantStatus, resp.Body)
			}
			if !json.Valid([]byte(resp.Body)) {
				t.Fatalf("body is not JSON: %.300s", resp.Body)
			}
			if resp.StatusCode == http.StatusBadRequest && !strings.Contains(resp.Body, `"BAD_REQUEST"`) {
				t.Fatalf("400 without its code: %s", resp.Body)
			}
		})
	}
}

// TestAPIWithRedisStopped: the login route fails closed with a contract 503 and
// the others degrade to the local fallback limit, each answer within
// REDIS_TIMEOUT plus a small margin.
func TestAPIWithRedisStopped(t *testing.T) {
	srv := redistest.StartServer(t)
	const redisTimeout = 100 * time.Millisecond
	api := apitest.Start(t, apitest.Env(srv.URL(), map[string]string{"REDIS_TIMEOUT": redisTimeout.String()}))
	if resp := apitest.Invoke(t, api, apitest.ReadEvent(t, "api-login.json")); resp.StatusCode != http.StatusOK {
		t.Fatalf("login with Redis up: %d %s", resp.StatusCode, resp.Body)
	}
	srv.Stop()

	tests := []struct {
		name  string
		event []byte
		check func(t *testing.T, resp apitest.Response)
	}{
		{"POST /auth/login fails closed: 503", apitest.ReadEvent(t, "api-login.json"), func(t *testing.T, resp apitest.Response) {
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503; %s", resp.StatusCode, resp.Body)
			}
			if resp.Header.Get("Retry-After") != "1" || resp.Body != string(contract.ServiceUnavailableBody(1)) {
				t.Fatalf("503 with Retry-After %q and body %s", resp.Header.Get("Retry-After"), resp.Body)
			}
			if resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("503 Content-Type %q", resp.Header.Get("Content-Type"))
			}
		}},
		{"GET /v1/items degrades to the fallback limit", apitest.ReadEvent(t, "api-rest-anonymous.json"), func(t *testing.T, resp apitest.Response) {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200; %s", resp.StatusCode, resp.Body)
			}
			apitest.CheckRateLimitHeaders(t, resp)
			// The fallback admits 30/1m divided by
			// RATE_LIMIT_FALLBACK_INSTANCES (10): 3, of which this is the
			// first.
			if got := resp.Header.Get("RateLimit-Remaining"); got != "2" {
				t.Fatalf("degraded RateLimit-Remaining %q, want 2 of the fallback's 3", got)
			}
		}},
		{"HTTP API GET /v1/items degrades too", apitest.ReadEvent(t, "api-httpapi-v2.json"), func(t *testing.T, resp apitest.Response) {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200; %s", resp.StatusCode, resp.Body)
			}
			apitest.CheckRateLimitHeaders(t, resp)
		}},
		{"GET /v1/quota shows the fallback, degraded", apitest.ReadEvent(t, "api-quota.json"), func(t *testing.T, resp apitest.Response) {
			if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"degraded":true`) {
				t.Fatalf("quota: %d %s", resp.StatusCode, resp.Body)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			resp := apitest.Invoke(t, api, tt.event)
			took := time.Since(start)
			tt.check(t, resp)
			t.Logf("answered in %v", took.Round(time.Microsecond))
			if took > redisTimeout+testkit.BudgetSlack {
				t.Fatalf("answered in %v, budget is REDIS_TIMEOUT %v + %v", took, redisTimeout, testkit.BudgetSlack)
			}
		})
	}
}
