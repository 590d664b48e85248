package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestAPIQuotaRouteLimit runs the built API function under the emulator
// with HTTP API events: GET /v1/quota spends from its own limit per caller
// (RATE_LIMIT_QUOTA) and only peeks at the caller's tier, so its
// limit+1th call is a contract 429 about the quota limit, a flood of it never
// writes the tier's counter, and the caller's ordinary requests still have
// their whole tier.
func TestAPIQuotaRouteLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	srv := redistest.StartServer(t)
	rie := lambdatest.StartRIE(t, lambdatest.BuildBootstrap(t, "./functions/api"), apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS": "5/1m",
		"RATE_LIMIT_QUOTA":     "3/1m",
	}))
	const ip = "203.0.113.150"
	invoke := func(t *testing.T, method, path string) apitest.Response {
		t.Helper()
		raw, err := rie.Invoke(t, apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.HTTP.Method = method
			e.RawPath, e.RequestContext.HTTP.Path = path, path
			e.RequestContext.HTTP.SourceIP = ip
			e.RequestContext.Authorizer = nil
		}))
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		return apitest.Parse(t, raw)
	}
	keys := func(t *testing.T, pattern string) int {
		t.Helper()
		found, err := srv.Client(t).Keys(context.Background(), pattern).Result()
		if err != nil {
			t.Fatalf("KEYS %s: %v", pattern, err)
		}
		return len(found)
	}

	for i := range 3 {
		resp := invoke(t, "GET", "/v1/quota")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("quota call %d within its limit: %d %s", i+1, resp.StatusCode, resp.Body)
		}
		var body struct {
			Limits []struct {
				Name      string `json:"name"`
				Remaining int64  `json:"remaining"`
			} `json:"limits"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
			t.Fatalf("quota body %q: %v", resp.Body, err)
		}
		if len(body.Limits) != 1 || body.Limits[0].Name != "anonymous" || body.Limits[0].Remaining != 5 {
			t.Fatalf("quota call %d: %s, want the anonymous tier, unspent (5 remaining)", i+1, resp.Body)
		}
		apitest.CheckRateLimitHeaders(t, resp)
	}
	for i := range 20 {
		resp := invoke(t, "GET", "/v1/quota")
		apitest.Check429(t, resp)
		if got := resp.Header.Get("RateLimit-Policy"); !strings.HasPrefix(got, `"quota";q=3;`) {
			t.Fatalf("quota call %d over its limit: RateLimit-Policy %q, want the quota limit's", 4+i, got)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Fatalf("quota 429: Cache-Control %q, want no-store", got)
		}
	}
	if n := keys(t, "*:anonymous:*"); n != 0 {
		t.Fatalf("23 quota calls wrote %d key(s) of the anonymous tier: the peek spent", n)
	}
	if n := keys(t, "*:quota:*"); n != 1 {
		t.Fatalf("%d quota limit keys, want 1 (one caller)", n)
	}
	resp := invoke(t, "GET", "/v1/items")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Remaining") != "4" {
		t.Fatalf("first item request after the quota flood: %d, RateLimit-Remaining %q; want 200 and 4 of 5",
			resp.StatusCode, resp.Header.Get("RateLimit-Remaining"))
	}
}

// TestAPIHTTPAPIAnswersAreNotCached: the API function's own 429 and 503 on
// the HTTP API (which has no gateway responses to add it) carry
// Cache-Control: no-store, as the REST API's gateway responses do.
func TestAPIHTTPAPIAnswersAreNotCached(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	srv := redistest.StartServer(t)
	rie := lambdatest.StartRIE(t, lambdatest.BuildBootstrap(t, "./functions/api"), apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS": "1/1m",
	}))
	invoke := func(t *testing.T, event []byte) apitest.Response {
		t.Helper()
		raw, err := rie.Invoke(t, event)
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		return apitest.Parse(t, raw)
	}
	items := apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) { e.RequestContext.HTTP.SourceIP = "203.0.113.151" })
	if resp := invoke(t, items); resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d %s", resp.StatusCode, resp.Body)
	}
	tooMany := invoke(t, items)
	apitest.Check429(t, tooMany)
	unavailable := invoke(t, apitest.ReadEvent(t, "api-httpapi-v2-unavailable.json"))
	if unavailable.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("unavailable event: %d %s, want 503", unavailable.StatusCode, unavailable.Body)
	}
	for name, resp := range map[string]apitest.Response{"429": tooMany, "503": unavailable} {
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("HTTP API %s: Cache-Control %q, want no-store", name, got)
		}
	}
}
