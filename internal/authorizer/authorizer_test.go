package authorizer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// newHandler is a handler on redisURL with small limits; overrides are
// pairs of environment names and values set on top.
func newHandler(t testing.TB, redisURL string, overrides ...string) *authorizer.Handler {
	t.Helper()
	env := map[string]string{
		"REDIS_URL":            redisURL,
		"RATE_LIMIT_ANONYMOUS": "2/1m",
		"API_KEY_HASHES":       "1f3fda5b3594c211778c561901737661ca21e8ebcf1ac1a3d60f006c470129f8",
		"JWT_ISSUER":           "https://auth.example.com/",
		"JWT_AUDIENCE":         "slidegate-example",
		"JWT_HS256_SECRET":     "slidegate-test-only-hs256-secret",
		"REDIS_TIMEOUT":        "100ms",
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		env[overrides[i]] = overrides[i+1]
	}
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] },
		instance.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return authorizer.New(rt)
}

// TestShapes: the shape is told from the JSON, and each shape gets its own
// kind of answer.
func TestShapes(t *testing.T) {
	srv := redistest.StartServer(t)
	h := newHandler(t, srv.URL())
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "events", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name    string
		payload []byte
		want    string // substring of the answer, or the error message
	}{
		{"REST REQUEST event: a policy", read("authorizer-anonymous.json"), `"policyDocument"`},
		{"HTTP API 2.0 event: a simple response", read("authorizer-httpapi-v2.json"), `"isAuthorized":true`},
		{"not JSON", []byte("{"), "Unauthorized"},
		{"JSON array", []byte("[1,2]"), "Unauthorized"},
		{"null", []byte("null"), "Unauthorized"},
		{"REST without methodArn", []byte(`{"type":"REQUEST","path":"/"}`), "Unauthorized"},
		{"version of the wrong type", []byte(`{"version":2}`), "Unauthorized"},
		{"HTTP API event of the wrong types: not authorized", []byte(`{"version":"2.0","headers":[1]}`), `{"isAuthorized":false}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.Invoke(context.Background(), tc.payload)
			got := string(out)
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestHTTPAPIDeny: over the limit, the HTTP API authorizer authorizes the
// request with the denial in its context (retryAfter), for the API
// function's middleware to answer 429: an HTTP API would answer 403.
func TestHTTPAPIDeny(t *testing.T) {
	srv := redistest.StartServer(t)
	tests := []struct {
		name       string
		denials    string
		authorized bool
	}{
		{"default: refused at the gateway", "", false},
		{"refuse: refused at the gateway", "refuse", false},
		{"forward: authorized with the denial", "forward", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandler(t, srv.URL(), "HTTP_API_DENIALS", tt.denials)
			ev := events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", Type: "REQUEST"}
			ev.RequestContext.HTTP.Method = "GET"
			ev.RequestContext.HTTP.Path = "/prod/v1/items"
			ev.RequestContext.HTTP.SourceIP = fmt.Sprintf("192.0.2.%d", 200+i)
			ev.RequestContext.Stage = "prod"
			var last events.APIGatewayV2CustomAuthorizerSimpleResponse
			for n := 0; n < 3; n++ {
				var err error
				last, err = h.HTTP(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				if n < 2 && (!last.IsAuthorized || last.Context[apigw.CtxRetryAfter] != nil) {
					t.Fatalf("request %d within the limit: %+v, want authorized without retryAfter", n+1, last)
				}
			}
			if tt.authorized {
				if out, ok := apigw.FromAuthorizerContext(last.Context); !last.IsAuthorized || !ok || len(out.Result.Decisions) != 1 || httplimit.Closest(out.Result).Allowed || httplimit.Closest(out.Result).RetryAfter < time.Second {
					t.Errorf("third request: %+v, want authorized with the denial (retryAfter) in the context", last)
				}
				return
			}
			if last.IsAuthorized || last.Context != nil {
				t.Errorf("third request: %+v, want not authorized (403) with no context", last)
			}
		})
	}
}

// restEvent is a REST REQUEST authorizer event from ip with headers.
func restEvent(method, path, ip string, headers map[string]string) events.APIGatewayCustomAuthorizerRequestTypeRequest {
	ev := events.APIGatewayCustomAuthorizerRequestTypeRequest{
		Type: "REQUEST", MethodArn: "arn:aws:execute-api:us-east-1:1:a/prod/" + method + path,
		Path: path, HTTPMethod: method, Headers: headers,
	}
	ev.RequestContext.Identity.SourceIP = ip
	return ev
}

// httpEvent is an HTTP API (payload 2.0) authorizer event from ip with
// headers, on the stage prod.
func httpEvent(method, path, ip string, headers map[string]string) events.APIGatewayV2CustomAuthorizerV2Request {
	ev := events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", Type: "REQUEST", Headers: headers}
	ev.RequestContext.HTTP.Method = method
	ev.RequestContext.HTTP.Path = "/prod" + path
	ev.RequestContext.HTTP.SourceIP = ip
	ev.RequestContext.Stage = "prod"
	return ev
}

// TestUnauthorizedOverTheLimitIsDenied: an unknown key or a bad token is
// answered unauthorized while its source IP's anonymous limit (2) admits
// it, and denied with retryAfter once that limit is spent, as the API
// function's middleware answers 401 then 429. REST: the error
// "Unauthorized" (401), then a Deny (ACCESS_DENIED, 429). HTTP API: not
// authorized (403), then, with HTTP_API_DENIALS=forward, authorized with
// the denial in the context, for the API function to answer 429, and by
// default still not authorized.
func TestUnauthorizedOverTheLimitIsDenied(t *testing.T) {
	srv := redistest.StartServer(t)
	h := newHandler(t, srv.URL(), "HTTP_API_DENIALS", "forward")
	refusing := newHandler(t, srv.URL())
	credentials := []struct {
		name    string
		headers func(i int) map[string]string
	}{
		{"unknown API key", func(i int) map[string]string { return map[string]string{"X-Api-Key": fmt.Sprintf("guess-%d", i)} }},
		{"token that does not verify", func(i int) map[string]string {
			return map[string]string{"Authorization": fmt.Sprintf("Bearer eyJhbGciOiJIUzI1NiJ9.e30.forged%d", i)}
		}},
	}
	for n, c := range credentials {
		t.Run("REST, "+c.name, func(t *testing.T) {
			ip := fmt.Sprintf("192.0.2.%d", 10+n)
			for i := range 2 {
				_, err := h.REST(context.Background(), restEvent("GET", "/v1/items", ip, c.headers(i)))
				if !errors.Is(err, authorizer.ErrUnauthorized) {
					t.Fatalf("request %d within the anonymous limit: err = %v, want Unauthorized", i+1, err)
				}
			}
			resp, err := h.REST(context.Background(), restEvent("GET", "/v1/items", ip, c.headers(2)))
			if err != nil {
				t.Fatalf("request 3, over the anonymous limit: err = %v, want a Deny", err)
			}
			if effect := resp.PolicyDocument.Statement[0].Effect; effect != "Deny" {
				t.Fatalf("request 3: effect %s, want Deny", effect)
			}
			if retry, ok := resp.Context[apigw.CtxRetryAfter].(int64); !ok || retry < 1 {
				t.Errorf("Deny context retryAfter = %v, want >= 1", resp.Context[apigw.CtxRetryAfter])
			}
			if resp.Context[apigw.CtxTier] != identity.TierAnonymous || resp.UsageIdentifierKey != "" || !strings.HasPrefix(resp.PrincipalID, "anonymous:") {
				t.Errorf("Deny is not the anonymous caller's: %+v", resp)
			}
		})
		t.Run("HTTP API, "+c.name, func(t *testing.T) {
			ip := fmt.Sprintf("192.0.2.%d", 20+n)
			for i := range 2 {
				resp, err := h.HTTP(context.Background(), httpEvent("GET", "/v1/items", ip, c.headers(i)))
				if err != nil || resp.IsAuthorized {
					t.Fatalf("request %d within the anonymous limit: %+v, %v; want not authorized", i+1, resp, err)
				}
			}
			resp, err := h.HTTP(context.Background(), httpEvent("GET", "/v1/items", ip, c.headers(2)))
			if err != nil || !resp.IsAuthorized {
				t.Fatalf("request 3, over the anonymous limit: %+v, %v; want authorized with the denial", resp, err)
			}
			out, ok := apigw.FromAuthorizerContext(resp.Context)
			d := httplimit.Closest(out.Result)
			if !ok || len(out.Result.Decisions) != 1 || d.Allowed || d.RetryAfter < time.Second || d.Limit.Name != identity.TierAnonymous {
				t.Errorf("context %v does not carry the anonymous limit's denial", resp.Context)
			}
		})
		t.Run("HTTP API refusing denials, "+c.name, func(t *testing.T) {
			ip := fmt.Sprintf("192.0.2.%d", 40+n)
			for i := range 3 {
				resp, err := refusing.HTTP(context.Background(), httpEvent("GET", "/v1/items", ip, c.headers(i)))
				if err != nil || resp.IsAuthorized {
					t.Fatalf("request %d: %+v, %v; want not authorized, within the limit and over it", i+1, resp, err)
				}
			}
		})
	}
}

// TestHTTPAPIFailClosedOutage: with Redis down and
// HTTP_API_DENIALS=forward, the HTTP API authorizer authorizes a
// fail-closed route with unavailable and retryAfter in the context (an
// error would be a bare 500), whether or not the credential verifies; a
// fail-open route gets a degraded allowance. By default it refuses the
// fail-closed route (403) and still allows the fail-open one. The REST
// authorizer's answer to the same outage stays an error.
func TestHTTPAPIFailClosedOutage(t *testing.T) {
	srv := redistest.StartServer(t)
	h := newHandler(t, srv.URL(), "HTTP_API_DENIALS", "forward")
	refusing := newHandler(t, srv.URL())
	srv.Stop()
	t.Run("refuse: login not authorized, items a degraded allowance", func(t *testing.T) {
		for _, headers := range []map[string]string{nil, {"x-api-key": "guess"}} {
			resp, err := refusing.HTTP(context.Background(), httpEvent("POST", "/auth/login", "192.0.2.31", headers))
			if err != nil || resp.IsAuthorized || resp.Context != nil {
				t.Errorf("login (headers %v): %+v, %v; want not authorized", headers, resp, err)
			}
		}
		resp, err := refusing.HTTP(context.Background(), httpEvent("GET", "/v1/items", "192.0.2.31", nil))
		if err != nil || !resp.IsAuthorized || resp.Context[apigw.CtxDegraded] != true {
			t.Errorf("items: %+v, %v; want a degraded allowance", resp, err)
		}
	})
	tests := []struct {
		name  string
		ev    events.APIGatewayV2CustomAuthorizerV2Request
		check func(t *testing.T, ctx map[string]any)
	}{
		{"login: unavailable", httpEvent("POST", "/auth/login", "192.0.2.30", nil), func(t *testing.T, ctx map[string]any) {
			out, _ := apigw.FromAuthorizerContext(ctx)
			if out.Kind != apigw.Unavailable || ctx[apigw.CtxRetryAfter] != int64(1) || ctx[apigw.CtxTier] != identity.TierAnonymous {
				t.Errorf("context %v, want tier, unavailable true and retryAfter 1", ctx)
			}
			if len(out.Result.Decisions) != 0 {
				t.Errorf("context %v reads as a decision", ctx)
			}
		}},
		{"login with an unknown key: unavailable, not a free 403", httpEvent("POST", "/auth/login", "192.0.2.30", map[string]string{"x-api-key": "guess"}), func(t *testing.T, ctx map[string]any) {
			if !unavailableIn(ctx) {
				t.Errorf("context %v, want unavailable", ctx)
			}
		}},
		{"items: degraded allowance", httpEvent("GET", "/v1/items", "192.0.2.30", nil), func(t *testing.T, ctx map[string]any) {
			if unavailableIn(ctx) || ctx[apigw.CtxDegraded] != true {
				t.Errorf("context %v, want degraded and not unavailable", ctx)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.HTTP(context.Background(), tt.ev)
			if err != nil || !resp.IsAuthorized {
				t.Fatalf("%+v, %v; want authorized", resp, err)
			}
			tt.check(t, resp.Context)
			// The context crosses API Gateway as JSON and must read back
			// the same on the other side.
			b, err := json.Marshal(resp.Context)
			if err != nil {
				t.Fatal(err)
			}
			var wire map[string]any
			if err := json.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			if unavailableIn(wire) != unavailableIn(resp.Context) {
				t.Errorf("unavailable does not survive JSON: %s", b)
			}
		})
	}
	t.Run("REST login: still an error", func(t *testing.T) {
		_, err := h.REST(context.Background(), restEvent("POST", "/auth/login", "192.0.2.30", map[string]string{"X-Api-Key": "guess"}))
		if !errors.Is(err, ratelimit.ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
	})
}

// TestHeaderSpellings: whatever the spelling of a header's name, and
// however many spellings an event carries, the credential the runtime
// sees is chosen the same way every time: the exactly lower-case one,
// else the one that sorts first; a multi-value header fills in only what
// the single-value map lacks.
func TestHeaderSpellings(t *testing.T) {
	srv := redistest.StartServer(t)
	h := newHandler(t, srv.URL())
	const known = "slidegate-example-api-key-0001"
	tests := []struct {
		name   string
		single map[string]string
		multi  map[string][]string
		want   string // "org" or "unauthorized"
	}{
		{"canonical spelling", map[string]string{"X-Api-Key": known}, nil, "org"},
		{"upper case", map[string]string{"X-API-KEY": known}, nil, "org"},
		{"the lower-case spelling wins over others", map[string]string{"X-API-KEY": "guess", "X-Api-Key": "guess", "x-api-key": known}, nil, "org"},
		{"without a lower-case spelling, the first in sorted order wins", map[string]string{"X-API-KEY": known, "X-Api-Key": "guess"}, nil, "org"},
		{"multi-value only", nil, map[string][]string{"X-Api-Key": {known, "guess"}}, "org"},
		{"single-value wins over multi-value", map[string]string{"x-api-key": "guess"}, map[string][]string{"x-api-key": {known}}, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 20 { // map order would differ between runs
				ev := restEvent("GET", "/v1/items", "192.0.2.40", tt.single)
				ev.MultiValueHeaders = tt.multi
				resp, err := h.REST(context.Background(), ev)
				got := "unauthorized"
				if err == nil {
					got, _ = resp.Context[apigw.CtxTier].(string)
				} else if !errors.Is(err, authorizer.ErrUnauthorized) {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Fatalf("run %d: %s, want %s", i+1, got, tt.want)
				}
				if got == "unauthorized" {
					return // the IP's anonymous limit is small
				}
			}
		})
	}
}

// TestFailClosedError: the fail-closed error is not "Unauthorized".
func TestFailClosedError(t *testing.T) {
	srv := redistest.StartServer(t)
	h := newHandler(t, srv.URL())
	srv.Stop()
	ev := events.APIGatewayCustomAuthorizerRequestTypeRequest{MethodArn: "arn:aws:execute-api:us-east-1:1:a/prod/POST/auth/login", Path: "/auth/login", HTTPMethod: "POST"}
	_, err := h.REST(context.Background(), ev)
	if err == nil || errors.Is(err, authorizer.ErrUnauthorized) || err.Error() == "Unauthorized" || !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable and not Unauthorized", err)
	}
}

// FuzzAuthorizerEvent feeds arbitrary payloads, and events with arbitrary
// paths, addresses and headers, through the whole event-to-decision path
// on a real Redis. It must never panic, and every answer must be one of the
// shapes API Gateway accepts.
func FuzzAuthorizerEvent(f *testing.F) {
	for _, name := range []string{"authorizer-anonymous.json", "authorizer-api-key.json", "authorizer-jwt-valid.json", "authorizer-httpapi-v2.json", "authorizer-malformed.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "events", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "GET", "/v1/items", "203.0.113.1", "", "")
	}
	srv := redistest.StartServer(f)
	h := newHandler(f, srv.URL())
	f.Fuzz(func(t *testing.T, payload []byte, method, path, ip, key, authz string) {
		check := func(out []byte, err error) {
			if err != nil {
				return // Unauthorized or unavailable: both are answers
			}
			var m map[string]any
			if json.Unmarshal(out, &m) != nil {
				t.Fatalf("answer is not JSON: %s", out)
			}
			if _, ok := m["isAuthorized"]; !ok {
				if _, ok := m["policyDocument"]; !ok {
					t.Fatalf("answer is neither a policy nor a simple response: %s", out)
				}
			}
		}
		check(h.Invoke(context.Background(), payload))
		ev := events.APIGatewayCustomAuthorizerRequestTypeRequest{
			Type: "REQUEST", MethodArn: "arn:aws:execute-api:us-east-1:1:a/prod/" + method + path,
			Path: path, HTTPMethod: method,
			Headers:        map[string]string{"X-Api-Key": key, "Authorization": authz, strings.ToUpper(key): authz},
			StageVariables: map[string]string{"rateLimitAnonymous": key, "rateLimitAlgorithm": authz},
		}
		ev.RequestContext.Identity.SourceIP = ip
		b, _ := json.Marshal(ev)
		check(h.Invoke(context.Background(), b))
	})
}

// TestRoutesMatchTheResourceNotTheBasePath: behind a custom domain with a
// base-path mapping, the event's path carries the base path; the login
// route's strict limit and fail-closed policy still apply, because routes
// are matched on the resource.
func TestRoutesMatchTheResourceNotTheBasePath(t *testing.T) {
	srv := redistest.StartServer(t)
	h := newHandler(t, srv.URL())
	login := func(ip string) events.APIGatewayCustomAuthorizerRequestTypeRequest {
		return events.APIGatewayCustomAuthorizerRequestTypeRequest{
			Type: "REQUEST", MethodArn: "arn:aws:execute-api:us-east-1:1:a/prod/POST/auth/login",
			Resource: "/auth/login", Path: "/api/auth/login", HTTPMethod: "POST",
			RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{
				Identity: events.APIGatewayCustomAuthorizerRequestTypeRequestIdentity{SourceIP: ip},
			},
		}
	}
	// With Redis stopped, only a route that matched /auth/* (fail-closed)
	// answers with an error; any other route gets a degraded Allow.
	srv.Stop()
	_, err := h.REST(context.Background(), login("198.51.100.77"))
	if !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("login behind a base path with Redis down: err = %v, want ErrUnavailable (fail-closed)", err)
	}
	greedy := login("198.51.100.78")
	greedy.Resource = "/{proxy+}"
	greedy.Path = "/auth/login"
	if _, err := h.REST(context.Background(), greedy); !errors.Is(err, ratelimit.ErrUnavailable) {
		t.Fatalf("login under a greedy resource: err = %v, want the path to decide (fail-closed)", err)
	}
	items := login("198.51.100.79")
	items.Resource, items.Path, items.HTTPMethod = "/v1/items", "/api/v1/items", "GET"
	if _, err := h.REST(context.Background(), items); err != nil {
		t.Fatalf("ordinary route with Redis down: %v, want a degraded Allow", err)
	}
}

// unavailableIn reports whether an authorizer context says its fail-closed
// route could not be decided.
func unavailableIn(ctx map[string]any) bool {
	out, ok := apigw.FromAuthorizerContext(ctx)
	return ok && out.Kind == apigw.Unavailable
}

// TestTokenEventIsRefused (issue 37, hole 4): a TOKEN authorizer event
// (AWS's input format: type, authorizationToken and methodArn, nothing
// else) carries no source address, method or path to decide on, so the
// authorizer is misconfigured: it is answered "Unauthorized" (401), never
// Allow, on a fail-closed route with Redis down as anywhere, and what is
// wrong is logged once per process, however many such events come.
func TestTokenEventIsRefused(t *testing.T) {
	srv := redistest.StartServer(t)
	var logs strings.Builder
	env := map[string]string{"REDIS_URL": srv.URL(), "REDIS_TIMEOUT": "100ms", "RATE_LIMIT_ANONYMOUS": "1000/1m"}
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] },
		instance.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	h := authorizer.New(rt)
	token := func(route string) []byte {
		return []byte(`{"type":"TOKEN","authorizationToken":"allow","methodArn":"arn:aws:execute-api:us-east-1:123456789012:abcdef123/prod/` + route + `"}`)
	}
	for i := 0; i < 3; i++ {
		out, err := h.Invoke(context.Background(), token("GET/v1/items"))
		if !errors.Is(err, authorizer.ErrUnauthorized) {
			t.Fatalf("TOKEN event %d: %s, %v; want the error Unauthorized", i, out, err)
		}
	}
	srv.Stop()
	if out, err := h.Invoke(context.Background(), token("POST/auth/login")); !errors.Is(err, authorizer.ErrUnauthorized) {
		t.Fatalf("TOKEN event for POST /auth/login with Redis down: %s, %v; want the error Unauthorized", out, err)
	}
	if n := strings.Count(logs.String(), "TOKEN authorizer"); n != 1 {
		t.Errorf("the misconfiguration is logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "REQUEST") || !strings.Contains(logs.String(), "context.identity.sourceIp") {
		t.Errorf("the log line does not say how to fix it:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), `"allow"`) {
		t.Errorf("the token is logged:\n%s", logs.String())
	}
}
