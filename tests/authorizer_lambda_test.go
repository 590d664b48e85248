package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// TestAuthorizerTierLimits: under the emulator, each kind of caller gets
// its tier's limit, the limit+1th request is denied with retryAfter >= 1,
// and nothing a caller adds to the request moves them to another bucket.
func TestAuthorizerTierLimits(t *testing.T) {
	srv := redistest.StartServer(t)
	secret := testkit.RandomSecret(t)
	rie := azStart(t, azEnv(srv.URL(), secret, nil))

	cases := []struct {
		name      string
		requests  func(i int) azRequest
		wantLimit int
		wantTier  string
	}{
		{"anonymous caller: 3 per source IP", func(int) azRequest {
			return azRequest{ip: "198.51.100.10"}
		}, 3, "anonymous"},
		{"known API key: the org limit of 5", func(int) azRequest {
			return azRequest{ip: "198.51.100.11", headers: map[string]string{"X-API-Key": azKey}}
		}, 5, "org"},
		{"verified JWT: the user limit of 4", func(int) azRequest {
			return azRequest{ip: "198.51.100.12", headers: map[string]string{"Authorization": "Bearer " + azToken(t, secret, "user-7")}}
		}, 4, "user"},
		{"the same user from many addresses is one bucket", func(i int) azRequest {
			return azRequest{ip: fmt.Sprintf("198.51.100.%d", 100+i), headers: map[string]string{"authorization": "Bearer " + azToken(t, secret, "user-8")}}
		}, 4, "user"},
		{"X-Forwarded-For changes nothing", func(i int) azRequest {
			return azRequest{ip: "198.51.100.13", headers: map[string]string{"X-Forwarded-For": fmt.Sprintf("10.0.0.%d", i)}}
		}, 3, "anonymous"},
		{"login route: its own limit of 2 on top of the tier", func(int) azRequest {
			return azRequest{ip: "198.51.100.14", method: "POST", path: "/auth/login"}
		}, 2, "anonymous"},
		{"stage variable raises the anonymous limit on its stage", func(int) azRequest {
			return azRequest{ip: "198.51.100.15", stage: "beta", stageVars: map[string]string{"rateLimitAnonymous": "6/1m"}}
		}, 6, "anonymous"},
		{"same address on a stage without the variable: the environment's 3", func(int) azRequest {
			return azRequest{ip: "198.51.100.16", stage: "prod"}
		}, 3, "anonymous"},
		{"addresses of one IPv6 /64: one bucket", func(i int) azRequest {
			return azRequest{ip: fmt.Sprintf("2001:db8:5:6:%x::%x", i, i+1)}
		}, 3, "anonymous"},
		{"an IPv4-mapped IPv6 address is its IPv4 address", func(i int) azRequest {
			return azRequest{ip: []string{"198.51.100.17", "::ffff:198.51.100.17"}[i%2]}
		}, 3, "anonymous"},
		{"source addresses that do not parse share one bucket", func(i int) azRequest {
			return azRequest{ip: fmt.Sprintf("not-an-address-%d", i)}
		}, 3, "anonymous"},
		{"stage variable rateLimitIpv6Prefix=128: each address alone", func(int) azRequest {
			return azRequest{ip: "2001:db8:5:7::1", stage: "beta", stageVars: map[string]string{"rateLimitIpv6Prefix": "128"}}
		}, 3, "anonymous"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < tc.wantLimit; i++ {
				a := azInvoke(t, rie, azRESTEvent(t, tc.requests(i)))
				if !a.allowed() {
					t.Fatalf("request %d of %d: not allowed: %+v", i+1, tc.wantLimit, a)
				}
				if tier := a.resp.Context["tier"]; tier != tc.wantTier {
					t.Fatalf("request %d: tier %v, want %s", i+1, tier, tc.wantTier)
				}
				if !strings.HasPrefix(a.resp.PrincipalID, tc.wantTier+":") {
					t.Errorf("principalId %q does not start with the tier", a.resp.PrincipalID)
				}
			}
			a := azInvoke(t, rie, azRESTEvent(t, tc.requests(tc.wantLimit)))
			if !a.denied() {
				t.Fatalf("request %d (limit+1): want Deny, got %+v", tc.wantLimit+1, a)
			}
			if ra, ok := a.ctxInt("retryAfter"); !ok || ra < 1 {
				t.Errorf("Deny context retryAfter = %v, want >= 1", a.resp.Context["retryAfter"])
			}
			if rem, _ := a.ctxInt("remaining"); rem != 0 {
				t.Errorf("Deny context remaining = %d, want 0", rem)
			}
		})
	}
	if logs := rie.FinalLogs(); strings.Contains(logs, azKey) || strings.Contains(logs, secret) || strings.Contains(logs, "198.51.100.10") {
		t.Error("the function log holds an API key, the JWT secret or a source IP in clear")
	}
}

// TestAuthorizerSprayIsHeldAtTheAnonymousLimit: 1,000 requests from one
// address, each with a different random API key or a forged token, are all
// counted against the address's anonymous limit: the first <limit> are
// Unauthorized (401), the rest denied with retryAfter (429, as the API
// function's middleware answers them), so a clean request from it is then
// denied; another address is untouched.
func TestAuthorizerSprayIsHeldAtTheAnonymousLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	secret := testkit.RandomSecret(t)
	const limit = 5
	rie := azStart(t, azEnv(srv.URL(), secret, map[string]string{"RATE_LIMIT_ANONYMOUS": fmt.Sprintf("%d/1h", limit)}))
	const sprayer = "203.0.113.66"
	unauthorized, denied := 0, 0
	for i := 0; i < 1000; i++ {
		headers := map[string]string{"x-api-key": testkit.RandomSecret(t)}
		if i%2 == 1 {
			headers = map[string]string{"Authorization": "Bearer " + azToken(t, testkit.RandomSecret(t), "victim")}
		}
		a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: sprayer, headers: headers}))
		switch {
		case i < limit && a.unauthorized:
			unauthorized++
		case i >= limit && a.denied():
			denied++
			if ra, ok := a.ctxInt("retryAfter"); !ok || ra < 1 {
				t.Fatalf("spray request %d: Deny with retryAfter %v, want >= 1", i+1, a.resp.Context["retryAfter"])
			}
			if got, _ := a.ctxInt("limit"); got != limit || a.resp.Context["tier"] != "anonymous" || a.resp.UsageIdentifierKey != "" {
				t.Fatalf("spray request %d: denied as %+v, want the anonymous limit of 5", i+1, a.resp)
			}
		default:
			t.Fatalf("spray request %d: want %s, got %+v", i+1, map[bool]string{true: "Unauthorized", false: "Deny"}[i < limit], a)
		}
	}
	if unauthorized != limit || denied != 1000-limit {
		t.Errorf("of 1000 sprayed requests, %d were Unauthorized and %d denied; want %d and %d", unauthorized, denied, limit, 1000-limit)
	}
	clean := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: sprayer}))
	if !clean.denied() {
		t.Fatalf("after the spray, the sprayer's clean request: want Deny (anonymous limit spent), got %+v", clean)
	}
	if limit, _ := clean.ctxInt("limit"); limit != 5 {
		t.Errorf("the sprayer is held at limit %d, want the anonymous 5", limit)
	}
	other := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: "203.0.113.67"}))
	if !other.allowed() {
		t.Errorf("another address was affected by the spray: %+v", other)
	}
}

// TestAuthorizerHTTPAPI runs the HTTP API (payload 2.0) simple-response
// authorizer under the emulator, with HTTP_API_DENIALS=forward as the
// template sets it, and hands its answers to the API function, as an HTTP
// API would: an HTTP API answers isAuthorized false with 403 and an
// authorizer error with a bare 500, so a 429 or a 503 can only come from
// the function, reading the authorizer's context.
func TestAuthorizerHTTPAPI(t *testing.T) {
	srv := redistest.StartServer(t)
	secret := testkit.RandomSecret(t)
	rie := azStart(t, azEnv(srv.URL(), secret, map[string]string{"HTTP_API_DENIALS": "forward"})) // anonymous 3/1m, POST /auth/*=2/1m
	// The API function behind it, on a Redis of its own: any decision it
	// made itself would leave a key there.
	fnRedis := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(fnRedis.URL(), nil))
	function := func(t *testing.T, ctx map[string]any, method, path string) apitest.Response {
		t.Helper()
		return apitest.Invoke(t, api, apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
			e.RequestContext.HTTP.Method = method
			e.RawPath, e.RequestContext.HTTP.Path = path, path
			e.Body = `{"username":"demo","password":"demo"}`
			e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: ctx}
		}))
	}

	t.Run("made-up keys: not authorized within the anonymous limit, then 429 from the function", func(t *testing.T) {
		for i := range 10 {
			resp := azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{ip: "203.0.113.70", stage: "prod", headers: map[string]string{"X-API-Key": testkit.RandomSecret(t)}}))
			if i < 3 {
				if resp.IsAuthorized {
					t.Fatalf("request %d within the limit: authorized %+v, want isAuthorized false (403)", i+1, resp)
				}
				continue
			}
			if !resp.IsAuthorized || resp.Context["retryAfter"] == nil || resp.Context["tier"] != "anonymous" {
				t.Fatalf("request %d over the limit: %+v, want authorized with the anonymous denial", i+1, resp)
			}
			apitest.Check429(t, function(t, resp.Context, "GET", "/v1/items"))
		}
	})

	t.Run("addresses of one IPv6 /64 are one caller", func(t *testing.T) {
		for i := range 4 {
			resp := azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{ip: fmt.Sprintf("2001:db8:9:9:%x::1", i), stage: "prod"}))
			if !resp.IsAuthorized || (resp.Context["retryAfter"] != nil) != (i == 3) {
				t.Fatalf("request %d: %+v, want authorized, with a denial (retryAfter) on the fourth only", i+1, resp)
			}
		}
	})

	t.Run("Redis stopped: the login route is a 503 from the function, not a 500", func(t *testing.T) {
		srv.Stop()
		before := apitest.RedisKeyCount(t, fnRedis)
		for _, headers := range []map[string]string{nil, {"x-api-key": testkit.RandomSecret(t)}} {
			resp := azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{ip: "203.0.113.71", method: "POST", path: "/auth/login", headers: headers}))
			if !resp.IsAuthorized || resp.Context["unavailable"] != true {
				t.Fatalf("login with Redis stopped (headers %v): %+v, want authorized with unavailable true", headers, resp)
			}
			if ra, ok := resp.Context["retryAfter"].(float64); !ok || ra != 1 {
				t.Fatalf("retryAfter %v, want 1", resp.Context["retryAfter"])
			}
			got := function(t, resp.Context, "POST", "/auth/login")
			if got.StatusCode != http.StatusServiceUnavailable || got.Header.Get("Retry-After") != "1" || got.Body != string(contract.ServiceUnavailableBody(1)) {
				t.Fatalf("function answered %d, Retry-After %q, %s; want the contract's 503", got.StatusCode, got.Header.Get("Retry-After"), got.Body)
			}
		}
		if after := apitest.RedisKeyCount(t, fnRedis); after != before {
			t.Fatalf("the function's Redis went from %d to %d keys: it decided again", before, after)
		}
		resp := azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{ip: "203.0.113.71"}))
		if !resp.IsAuthorized || resp.Context["degraded"] != true || resp.Context["unavailable"] != nil {
			t.Fatalf("fail-open route with Redis stopped: %+v, want a degraded allowance", resp)
		}
	})
}

// TestAuthorizerHTTPAPIRefusesByDefault: without HTTP_API_DENIALS the
// built authorizer refuses at the gateway what it cannot admit, so that no
// integration behind it ever serves a denied or fail-closed request:
// isAuthorized false (the HTTP API's 403) over the limit, and on a
// fail-closed route with Redis stopped, with no context at all.
func TestAuthorizerHTTPAPIRefusesByDefault(t *testing.T) {
	srv := redistest.StartServer(t)
	rie := azStart(t, azEnv(srv.URL(), testkit.RandomSecret(t), nil)) // anonymous 3/1m
	for i := range 4 {
		resp := azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{ip: "203.0.113.80", stage: "prod"}))
		if i < 3 {
			if !resp.IsAuthorized || resp.Context["retryAfter"] != nil {
				t.Fatalf("request %d within the limit: %+v, want authorized", i+1, resp)
			}
			continue
		}
		if resp.IsAuthorized || resp.Context != nil {
			t.Fatalf("request %d over the limit: %+v, want isAuthorized false and no context", i+1, resp)
		}
	}
	srv.Stop()
	resp := azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{ip: "203.0.113.81", method: "POST", path: "/auth/login"}))
	if resp.IsAuthorized || resp.Context != nil {
		t.Fatalf("fail-closed login with Redis stopped: %+v, want isAuthorized false and no context", resp)
	}
	resp = azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{ip: "203.0.113.81"}))
	if !resp.IsAuthorized || resp.Context["degraded"] != true {
		t.Fatalf("fail-open route with Redis stopped: %+v, want a degraded allowance", resp)
	}
}

// TestAuthorizerInstancesShareOneLimit: several emulators (warm instances)
// hit concurrently for one address admit exactly the limit between them.
func TestAuthorizerInstancesShareOneLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	const (
		instances = 4
		each      = 25
		limit     = 40
	)
	env := azEnv(srv.URL(), testkit.RandomSecret(t), map[string]string{
		"RATE_LIMIT_ANONYMOUS": fmt.Sprintf("%d/1h", limit),
		"RATE_LIMIT_ALGORITHM": "sliding-log", // exact in any window
		"REDIS_TIMEOUT":        "2s",          // this test is about counting, not latency
	})
	ries := make([]*lambdatest.RIE, instances)
	for i := range ries {
		ries[i] = azStart(t, env)
	}
	event := azRESTEvent(t, azRequest{ip: "192.0.2.77"})
	var admitted, denied atomic.Int64
	errs := make(chan error, instances*each)
	var wg sync.WaitGroup
	for _, r := range ries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				body, err := r.InvokeContext(context.Background(), event)
				if err != nil {
					errs <- err
					continue
				}
				switch {
				case strings.Contains(string(body), `"Effect":"Allow"`):
					admitted.Add(1)
					if strings.Contains(string(body), `"degraded":true`) {
						errs <- errors.New("a decision was degraded: the count is not Redis's")
					}
				case strings.Contains(string(body), `"Effect":"Deny"`):
					denied.Add(1)
				default:
					errs <- fmt.Errorf("unexpected answer %s", body)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if admitted.Load() != limit || denied.Load() != instances*each-limit {
		t.Errorf("%d instances x %d requests: admitted %d, denied %d; want exactly %d admitted", instances, each, admitted.Load(), denied.Load(), limit)
	}
}

// TestAuthorizerWithRedisStopped: with Redis gone, a normal route gets a
// degraded Allow and the login route (fail-closed) an error that is not
// "Unauthorized" (API Gateway: AUTHORIZER_FAILURE, 503 by the template),
// both within REDIS_TIMEOUT plus a margin.
func TestAuthorizerWithRedisStopped(t *testing.T) {
	srv := redistest.StartServer(t)
	rie := azStart(t, azEnv(srv.URL(), testkit.RandomSecret(t), map[string]string{"REDIS_TIMEOUT": "100ms"}))
	if a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: "192.0.2.50"})); !a.allowed() {
		t.Fatalf("warm-up with Redis up: %+v", a)
	}
	srv.Stop()

	const bound = 2 * time.Second // generous; the measured figure is logged
	cases := []struct {
		name  string
		req   azRequest
		check func(t *testing.T, a azAnswer)
	}{
		{"normal route: degraded Allow", azRequest{ip: "192.0.2.50"}, func(t *testing.T, a azAnswer) {
			if !a.allowed() || a.resp.Context["degraded"] != true {
				t.Errorf("want Allow with degraded true, got %+v", a)
			}
		}},
		{"login route: an error, not Unauthorized", azRequest{ip: "192.0.2.50", method: "POST", path: "/auth/login"}, func(t *testing.T, a azAnswer) {
			if a.err == nil || a.unauthorized {
				t.Errorf("want a function error other than Unauthorized, got %+v", a)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			a := azInvoke(t, rie, azRESTEvent(t, tc.req))
			took := time.Since(start)
			tc.check(t, a)
			t.Logf("answered in %s with Redis stopped (REDIS_TIMEOUT=100ms)", took)
			if took > bound {
				t.Errorf("took %s, want within %s", took, bound)
			}
		})
	}
}

// TestAuthorizerEvents invokes every events/authorizer-*.json, as `make
// invoke` would, with the test-only credentials those events were made with
// (see mk/functions.mk), and checks each does what its name says.
func TestAuthorizerEvents(t *testing.T) {
	srv := redistest.StartServer(t)
	env := azEnv(srv.URL(), "slidegate-test-only-hs256-secret", map[string]string{
		"API_KEY_HASHES":       "1f3fda5b3594c211778c561901737661ca21e8ebcf1ac1a3d60f006c470129f8", // slidegate-example-api-key-0001
		"RATE_LIMIT_ANONYMOUS": "30/1m",
		"RATE_LIMIT_ROUTES":    "POST /auth/*=5/1m",
		"RATE_LIMIT_HASH_KEY":  "slidegate-local-only-identity-hash-key-0001",
	})
	rie := azStart(t, env)
	want := map[string]func(t *testing.T, body []byte, err error){
		"authorizer-anonymous.json":    wantPolicy("Allow", "anonymous", false),
		"authorizer-ipv6.json":         wantPolicy("Allow", "anonymous", false),
		"authorizer-api-key.json":      wantPolicy("Allow", "org", true),
		"authorizer-jwt-valid.json":    wantPolicy("Allow", "user", false),
		"authorizer-jwt-invalid.json":  wantUnauthorized,
		"authorizer-login.json":        wantPolicy("Allow", "anonymous", false),
		"authorizer-login-greedy.json": wantPolicy("Allow", "anonymous", false),
		"authorizer-malformed.json":    wantUnauthorized,
		"authorizer-httpapi-v2.json": func(t *testing.T, body []byte, err error) {
			if err != nil || !strings.Contains(string(body), `"isAuthorized":true`) || !strings.Contains(string(body), `"tier":"anonymous"`) {
				t.Errorf("want a simple response isAuthorized true, got %s (%v)", body, err)
			}
		},
	}
	files, err := filepath.Glob(filepath.Join("..", "events", "authorizer-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no events/authorizer-*.json (%v)", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			check, ok := want[name]
			if !ok {
				t.Fatalf("%s has no expectation in this test", name)
			}
			event, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if name == "authorizer-jwt-valid.json" {
				event = refreshEventToken(t, event, "slidegate-test-only-hs256-secret")
			}
			body, err := rie.Invoke(t, event)
			var fe *lambdatest.FunctionError
			if err != nil && !errors.As(err, &fe) {
				t.Fatal(err)
			}
			check(t, body, err)
		})
	}
	t.Run("the login events carry the route limit", func(t *testing.T) {
		// authorizer-login-greedy.json asks for /%61uth/login under the
		// greedy resource /{proxy+}: the API function serves it as
		// /auth/login, so the login limit holds it too.
		for _, name := range []string{"authorizer-login.json", "authorizer-login-greedy.json"} {
			a := azInvoke(t, rie, azReadEvent(t, name))
			if a.resp.Context["name"] != "POST /auth/*" {
				t.Errorf("%s: context name = %v, want the route limit", name, a.resp.Context["name"])
			}
		}
	})
}

func wantPolicy(effect, tier string, usageKey bool) func(t *testing.T, body []byte, err error) {
	return func(t *testing.T, body []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("function error %v", err)
		}
		s := string(body)
		if !strings.Contains(s, `"Effect":"`+effect+`"`) || !strings.Contains(s, `"tier":"`+tier+`"`) {
			t.Errorf("want %s for tier %s, got %s", effect, tier, s)
		}
		if got := strings.Contains(s, `"usageIdentifierKey":"slidegate-example-api-key-0001"`); got != usageKey {
			t.Errorf("usageIdentifierKey present = %v, want %v: %s", got, usageKey, s)
		}
	}
}

func wantUnauthorized(t *testing.T, body []byte, err error) {
	t.Helper()
	var fe *lambdatest.FunctionError
	if !errors.As(err, &fe) || fe.Message != "Unauthorized" {
		t.Errorf("want the error Unauthorized, got %s (%v)", body, err)
	}
}

// TestAuthorizerWithRedisHanging: Redis accepts connections and never
// answers. Decisions are still bounded by REDIS_TIMEOUT (plus a margin): a
// degraded Allow on a normal route, an error on the login route.
func TestAuthorizerWithRedisHanging(t *testing.T) {
	blackhole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := blackhole.Accept()
			if err != nil {
				return
			}
			go func() { // read and never answer
				_, _ = io.Copy(io.Discard, conn)
				conn.Close()
			}()
		}
	}()
	t.Cleanup(func() { blackhole.Close() })

	rie := azStart(t, azEnv("redis://"+blackhole.Addr().String(), testkit.RandomSecret(t), map[string]string{"REDIS_TIMEOUT": "100ms"}))
	// The cold start (script preload against a silent server) is not what
	// is measured here.
	azInvoke(t, rie, azRESTEvent(t, azRequest{ip: "192.0.2.90", path: "/warm-up"}))

	const bound = 2 * time.Second
	cases := []struct {
		name       string
		req        azRequest
		wantDegrad bool
	}{
		{"normal route: degraded Allow", azRequest{ip: "192.0.2.91"}, true},
		{"login route: an error", azRequest{ip: "192.0.2.91", method: "POST", path: "/auth/login"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			a := azInvoke(t, rie, azRESTEvent(t, tc.req))
			took := time.Since(start)
			t.Logf("answered in %s with Redis hanging (REDIS_TIMEOUT=100ms)", took)
			if tc.wantDegrad && (!a.allowed() || a.resp.Context["degraded"] != true) {
				t.Errorf("want a degraded Allow, got %+v", a)
			}
			if !tc.wantDegrad && (a.err == nil || a.unauthorized) {
				t.Errorf("want a function error other than Unauthorized, got %+v", a)
			}
			if took > bound {
				t.Errorf("took %s, want within %s", took, bound)
			}
		})
	}
}

// refreshEventToken re-signs the bearer token of an example event with the
// same claims but iat now and exp an hour ahead: the checked-in token may
// live at most a year (identity.MaxTokenLifetime), and the test must not
// rot when it expires.
func refreshEventToken(t *testing.T, event []byte, secret string) []byte {
	t.Helper()
	m := regexp.MustCompile(`Bearer ([A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+)`).FindSubmatch(event)
	if m == nil {
		t.Fatal("the event carries no bearer token")
	}
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(string(m[1]), claims); err != nil {
		t.Fatal(err)
	}
	claims["iat"], claims["exp"] = time.Now().Unix(), time.Now().Add(time.Hour).Unix()
	fresh, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(event, m[1], []byte(fresh))
}
