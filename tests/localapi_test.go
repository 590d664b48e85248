package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/cmd/localapi/server"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/deployconfig"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/internal/testkit/sfv"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// The local API tests start `make local`'s server in-process on a free
// port and drive it over HTTP with a real client, once on the embedded
// Redis and once on a real redis-server.

const (
	localJWTIssuer   = "localapi-test"
	localJWTAudience = "localapi-test"
	localJWTSecret   = "localapi-test-secret-0123456789abcdef"
	localOrgKey      = "localapi-test-org-key"
)

// localAPI is a running local server and what it logged.
type localAPI struct {
	srv    *server.Server
	base   string
	client *http.Client
	log    *testkit.Buffer
}

// startLocalAPI serves stage of template.yaml on 127.0.0.1:0. redisURL ""
// means the embedded Redis.
func startLocalAPI(t *testing.T, stage, redisURL string, httpAPI bool) *localAPI {
	t.Helper()
	return startLocalAPIWith(t, stage, redisURL, httpAPI, nil)
}

// startLocalAPIWith is startLocalAPI with more environment variables, as
// given on the command line of `make local`.
func startLocalAPIWith(t *testing.T, stage, redisURL string, httpAPI bool, extra map[string]string) *localAPI {
	t.Helper()
	sum := sha256.Sum256([]byte(localOrgKey))
	env := map[string]string{
		"REDIS_URL":        redisURL,
		"JWT_ISSUER":       localJWTIssuer,
		"JWT_AUDIENCE":     localJWTAudience,
		"JWT_HS256_SECRET": localJWTSecret,
		"API_KEY_HASHES":   hex.EncodeToString(sum[:]),
	}
	for k, v := range extra {
		env[k] = v
	}
	log := &testkit.Buffer{}
	srv, err := server.Start(context.Background(), server.Config{
		Addr:           "127.0.0.1:0",
		Stage:          stage,
		HTTPAPI:        httpAPI,
		TemplatePath:   "../template.yaml",
		SamconfigPath:  "../samconfig.toml",
		Getenv:         func(name string) string { return env[name] },
		Logger:         slog.New(slog.NewTextHandler(log, nil)),
		FunctionLogger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatalf("start local API: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	if redisURL == "" && !srv.Embedded {
		t.Fatalf("want the embedded Redis")
	}
	return &localAPI{srv: srv, base: "http://" + srv.Addr(), client: &http.Client{Timeout: 10 * time.Second}, log: log}
}

type localResponse struct {
	status int
	header http.Header
	body   string
}

func (a *localAPI) do(t *testing.T, method, path string, header map[string]string) localResponse {
	t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(""))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return localResponse{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// requests counts the server's per-request log lines.
func (a *localAPI) requests() int {
	return strings.Count(a.log.String(), "msg=request ")
}

func bearer(t *testing.T, secret, sub string) map[string]string {
	t.Helper()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": sub, "iss": localJWTIssuer, "aud": localJWTAudience,
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return map[string]string{"Authorization": "Bearer " + token}
}

var (
	policyHeader    = regexp.MustCompile(`^"([a-z]+)";q=([0-9]+);w=([0-9]+)$`)
	rateLimitHeader = regexp.MustCompile(`^"([a-z]+)";r=([0-9]+);t=([0-9]+)$`)
)

// checkLimitHeaders checks the contract's headers of a limited response of the
// given policy and returns RateLimit-Remaining.
func checkLimitHeaders(t *testing.T, what string, r localResponse, policy string, limit int64) int64 {
	t.Helper()
	h := r.header
	if m := policyHeader.FindStringSubmatch(h.Get("RateLimit-Policy")); m == nil || m[1] != policy || m[2] != strconv.FormatInt(limit, 10) {
		t.Errorf("%s: RateLimit-Policy %q, want %q;q=%d;w=...", what, h.Get("RateLimit-Policy"), policy, limit)
	}
	if got := h.Get("RateLimit-Limit"); got != strconv.FormatInt(limit, 10) {
		t.Errorf("%s: RateLimit-Limit %q, want %d", what, got, limit)
	}
	if got := h.Get("X-RateLimit-Limit"); got != strconv.FormatInt(limit, 10) {
		t.Errorf("%s: X-RateLimit-Limit %q, want %d", what, got, limit)
	}
	remaining, err := strconv.ParseInt(h.Get("RateLimit-Remaining"), 10, 64)
	if err != nil || remaining < 0 || remaining > limit {
		t.Errorf("%s: RateLimit-Remaining %q", what, h.Get("RateLimit-Remaining"))
	}
	if h.Get("X-RateLimit-Remaining") != h.Get("RateLimit-Remaining") {
		t.Errorf("%s: X-RateLimit-Remaining %q != RateLimit-Remaining %q", what, h.Get("X-RateLimit-Remaining"), h.Get("RateLimit-Remaining"))
	}
	reset, err := strconv.ParseInt(h.Get("RateLimit-Reset"), 10, 64)
	if err != nil || reset < 0 {
		t.Errorf("%s: RateLimit-Reset %q", what, h.Get("RateLimit-Reset"))
	}
	if resetAt, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err != nil || resetAt < time.Now().Unix()-5 {
		t.Errorf("%s: X-RateLimit-Reset %q is not a Unix time", what, h.Get("X-RateLimit-Reset"))
	}
	if m := rateLimitHeader.FindStringSubmatch(h.Get("RateLimit")); m == nil || m[1] != policy || m[2] != h.Get("RateLimit-Remaining") || m[3] != h.Get("RateLimit-Reset") {
		hint := ""
		if h.Get("RateLimit") == "" && h.Get("x-amzn-ErrorType") != "" {
			hint = " (a gateway response: template.yaml maps RateLimit to context.authorizer.rateLimit, which the authorizer's context must carry)"
		}
		t.Errorf("%s: RateLimit %q, want %q;r=<RateLimit-Remaining>;t=<RateLimit-Reset>%s", what, h.Get("RateLimit"), policy, hint)
	}
	return remaining
}

// TestLocalAPI drives the REST API over the embedded Redis and over a real
// redis-server: contract headers on 2xx, 429 with Retry-After and the exact body
// after the limit, 401 for bad credentials, one log line per request, and
// (real Redis only, which the test can stop) 503 on the fail-closed login
// route when Redis is down while a fail-open route degrades.
func TestLocalAPI(t *testing.T) {
	backends := []struct {
		name  string
		redis func(t *testing.T) (url string, stop func())
	}{
		{"embedded", func(*testing.T) (string, func()) { return "", nil }},
		{"redis-server", func(t *testing.T) (string, func()) {
			s := redistest.StartServer(t)
			return s.URL(), s.Stop
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			url, stopRedis := b.redis(t)
			api := startLocalAPI(t, "dev", url, false)
			anonymous := stageLimit(t, "dev", "RateLimitAnonymous")
			sent := 0

			if r := api.do(t, "GET", "/health", nil); r.status != http.StatusOK {
				t.Errorf("GET /health: %d %s", r.status, r.body)
			}
			sent++

			// Bad credentials: 401 before any other answer, counted
			// against the source IP's anonymous limit.
			bad := []struct {
				name   string
				header map[string]string
			}{
				{"unknown API key", map[string]string{"x-api-key": "not-a-known-key"}},
				{"token signed with another key", bearer(t, "some-other-secret-0123456789abcdef", "mallory")},
			}
			for _, c := range bad {
				r := api.do(t, "GET", "/v1/items", c.header)
				sent++
				if r.status != http.StatusUnauthorized || !strings.Contains(r.body, `"code":"UNAUTHORIZED"`) {
					t.Errorf("%s: got %d %s, want 401 UNAUTHORIZED", c.name, r.status, r.body)
				}
			}

			// The anonymous limit: every 2xx carries the headers, the
			// remaining count goes down by one, then 429.
			admitted := int64(len(bad))
			var denied localResponse
			for i := 0; i < int(anonymous)+5; i++ {
				r := api.do(t, "GET", "/v1/items", nil)
				sent++
				if r.status == http.StatusTooManyRequests {
					denied = r
					break
				}
				if r.status != http.StatusOK {
					t.Fatalf("request %d: %d %s", i, r.status, r.body)
				}
				admitted++
				if got := checkLimitHeaders(t, fmt.Sprintf("2xx #%d", i), r, "anonymous", anonymous); got != anonymous-admitted {
					t.Errorf("2xx #%d: RateLimit-Remaining %d, want %d", i, got, anonymous-admitted)
				}
			}
			if denied.status != http.StatusTooManyRequests {
				t.Fatalf("no 429 after %d requests (limit %d)", admitted, anonymous)
			}
			if admitted != anonymous {
				t.Errorf("admitted %d requests (401s included), want the limit %d", admitted, anonymous)
			}
			retry, err := strconv.ParseInt(denied.header.Get("Retry-After"), 10, 64)
			// The sliding-window counter (a 1m window here) can make a caller
			// who filled the limit early in a window wait into the next one,
			// while the previous window's weight decays: up to two windows.
			if err != nil || retry < 1 || retry > 120 {
				t.Errorf("429 Retry-After %q, want 1..120 seconds", denied.header.Get("Retry-After"))
			}
			if got := checkLimitHeaders(t, "429", denied, "anonymous", anonymous); got != 0 {
				t.Errorf("429: RateLimit-Remaining %d, want 0", got)
			}
			if denied.header.Get("RateLimit-Reset") != denied.header.Get("Retry-After") {
				t.Errorf("429: RateLimit-Reset %q != Retry-After %q", denied.header.Get("RateLimit-Reset"), denied.header.Get("Retry-After"))
			}
			if ct := denied.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("429 Content-Type %q", ct)
			}
			if want := string(contract.TooManyRequestsBody(retry)); denied.body != want {
				t.Errorf("429 body:\n got %s\nwant %s", denied.body, want)
			}

			// Verified callers have their own, bigger buckets.
			tiers := []struct {
				name, policy, param string
				header              map[string]string
			}{
				{"bearer token", "user", "RateLimitUser", bearer(t, localJWTSecret, "user-42")},
				{"API key", "org", "RateLimitOrg", map[string]string{"x-api-key": localOrgKey}},
			}
			for _, c := range tiers {
				r := api.do(t, "GET", "/v1/items", c.header)
				sent++
				if r.status != http.StatusOK {
					t.Errorf("%s: %d %s", c.name, r.status, r.body)
					continue
				}
				checkLimitHeaders(t, c.name, r, c.policy, stageLimit(t, "dev", c.param))
			}

			if got := api.requests(); got != sent {
				t.Errorf("server logged %d request lines for %d requests", got, sent)
			}
			if strings.Contains(api.log.String(), localOrgKey) || strings.Contains(api.log.String(), "not-a-known-key") {
				t.Errorf("an API key reached the log")
			}

			if stopRedis == nil {
				return
			}
			stopRedis()
			org := map[string]string{"x-api-key": localOrgKey}
			r := api.do(t, "POST", "/auth/login", org)
			if r.status != http.StatusServiceUnavailable {
				t.Fatalf("POST /auth/login with Redis down: %d %s, want 503", r.status, r.body)
			}
			retry, err = strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
			if err != nil || retry < 1 {
				t.Errorf("503 Retry-After %q", r.header.Get("Retry-After"))
			}
			if want := string(contract.ServiceUnavailableBody(retry)); r.body != want {
				t.Errorf("503 body:\n got %s\nwant %s", r.body, want)
			}
			if r := api.do(t, "GET", "/v1/items", org); r.status != http.StatusOK {
				t.Errorf("GET /v1/items with Redis down (fail-open): %d %s, want 200 from the fallback", r.status, r.body)
			}
		})
	}
}

// TestLocalAPIStages: each stage's samconfig.toml overrides reach the
// authorizer as stage variables, so two stages limit differently.
func TestLocalAPIStages(t *testing.T) {
	limits := map[string]int64{}
	for _, stage := range []string{"dev", "prod"} {
		want := stageLimit(t, stage, "RateLimitAnonymous")
		api := startLocalAPI(t, stage, "", false)
		if got := api.srv.Spec.StageVariables["rateLimitAnonymous"]; got == "" {
			t.Errorf("%s: no rateLimitAnonymous stage variable", stage)
		}
		r := api.do(t, "GET", "/v1/items", nil)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", stage, r.status, r.body)
		}
		checkLimitHeaders(t, stage, r, "anonymous", want)
		limits[stage] = want
	}
	if limits["dev"] == limits["prod"] {
		t.Errorf("dev and prod have the same anonymous limit %d: the stage test proves nothing", limits["dev"])
	}
}

// TestLocalAPIEnvironmentLimitWins: a limit given in the environment
// (`RATE_LIMIT_ANONYMOUS=3/5s make local`) wins over the stage variable
// that samconfig.toml gives the same limit, on the REST and the HTTP API,
// and the server reports each limit and setting (routes, fail-closed
// globs, fallback, IPv6 prefix) with where it came from.
func TestLocalAPIEnvironmentLimitWins(t *testing.T) {
	for _, httpAPI := range []bool{false, true} {
		t.Run(fmt.Sprintf("HTTP API %v", httpAPI), func(t *testing.T) {
			api := startLocalAPIWith(t, "dev", "", httpAPI, map[string]string{"RATE_LIMIT_ANONYMOUS": "3/5s"})
			for i := range 3 {
				r := api.do(t, "GET", "/v1/items", nil)
				if r.status != http.StatusOK || r.header.Get("RateLimit-Policy") != `"anonymous";q=3;w=5` {
					t.Fatalf("request %d: %d, RateLimit-Policy %q; want 200 under the environment's 3/5s", i+1, r.status, r.header.Get("RateLimit-Policy"))
				}
			}
			if r := api.do(t, "GET", "/v1/items", nil); r.status != http.StatusTooManyRequests {
				t.Fatalf("request 4: %d %s, want 429 under the environment's 3/5s", r.status, r.body)
			}
			sources := map[string]string{}
			for _, l := range api.srv.Limits {
				sources[l.Name] = l.Value + " from " + l.Source
			}
			if got := sources["rateLimitAnonymous"]; got != "3/5s from environment RATE_LIMIT_ANONYMOUS" {
				t.Errorf("rateLimitAnonymous reported as %q", got)
			}
			if got, want := sources["rateLimitUser"], fmt.Sprintf("%d/1m from samconfig.toml [dev] RateLimitUser", stageLimit(t, "dev", "RateLimitUser")); got != want {
				t.Errorf("rateLimitUser reported as %q, want %q", got, want)
			}
			// The settings without a stage variable too, from the template.
			for name, want := range map[string]string{
				"RATE_LIMIT_ROUTES":             "POST /auth/*=5/1m:sliding-log from template default RateLimitRoutes",
				"RATE_LIMIT_FAIL_CLOSED":        "/auth/* from template default RateLimitFailClosed",
				"RATE_LIMIT_FALLBACK_INSTANCES": "10 from template default RateLimitFallbackInstances",
				"rateLimitIpv6Prefix":           "64 from template default RateLimitIpv6Prefix",
				"rateLimitQuota":                fmt.Sprintf("%d/1m from samconfig.toml [dev] RateLimitQuota", stageLimit(t, "dev", "RateLimitQuota")),
			} {
				if got := sources[name]; got != want {
					t.Errorf("%s reported as %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestLocalAPIHTTPAPI: the HTTP API (v2 events, simple-response
// authorizer) serves the same limits, and over the limit the API function
// answers 429 itself (an HTTP API cannot turn a deny into 429).
func TestLocalAPIHTTPAPI(t *testing.T) {
	api := startLocalAPI(t, "dev", "", true)
	anonymous := stageLimit(t, "dev", "RateLimitAnonymous")
	for i := int64(0); i < anonymous; i++ {
		r := api.do(t, "GET", "/v1/items", nil)
		if r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
		if got := checkLimitHeaders(t, fmt.Sprintf("2xx #%d", i), r, "anonymous", anonymous); got != anonymous-i-1 {
			t.Errorf("2xx #%d: RateLimit-Remaining %d, want %d", i, got, anonymous-i-1)
		}
	}
	r := api.do(t, "GET", "/v1/items", nil)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("over the limit: %d %s, want 429 from the API function (the simple-response authorizer must authorize an over-limit "+
			"request with the decision in its context: an HTTP API answers any unauthorized request 403)", r.status, r.body)
	}
	retry, _ := strconv.ParseInt(r.header.Get("Retry-After"), 10, 64)
	if want := string(contract.TooManyRequestsBody(retry)); r.body != want {
		t.Errorf("429 body:\n got %s\nwant %s", r.body, want)
	}
}

// TestLocalAPIMissingRoute: a path no event declares is API Gateway's 403
// "Missing Authentication Token", without running the authorizer.
func TestLocalAPIMissingRoute(t *testing.T) {
	api := startLocalAPI(t, "dev", "", false)
	for _, c := range []struct{ method, path string }{{"GET", "/nowhere"}, {"DELETE", "/v1/items"}} {
		r := api.do(t, c.method, c.path, nil)
		if r.status != http.StatusForbidden || r.body != `{"message":"Missing Authentication Token"}` {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
}

// stageLimit is the count of a tier limit parameter in a samconfig.toml
// environment (the template's default when the environment leaves it).
func stageLimit(t *testing.T, stage, param string) int64 {
	t.Helper()
	overrides, err := deployconfig.ParameterOverrides("../samconfig.toml", stage)
	if err != nil {
		t.Fatalf("%v", err)
	}
	v, ok := overrides[param]
	if !ok {
		t.Fatalf("samconfig.toml [%s]: no %s override", stage, param)
	}
	count, _, err := config.ParseRate(v)
	if err != nil {
		t.Fatalf("samconfig.toml [%s]: %s=%q: %v", stage, param, v, err)
	}
	return count
}

// TestLocalAPIDemoPlan: `make local` serves the dev stage's plans: its
// demo key local-pro-key, and a token whose plan claim says pro, get plan
// pro's three limits, listed in RateLimit-Policy (the REST gateway's
// answer, as API Gateway would give it).
func TestLocalAPIDemoPlan(t *testing.T) {
	api := startLocalAPIWith(t, "dev", "", false, map[string]string{"API_KEY_HASHES": "", "JWT_PLAN_CLAIM": "plan"})
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "plan-user", "iss": localJWTIssuer, "aud": localJWTAudience, "plan": "pro",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
	}).SignedString([]byte(localJWTSecret))
	if err != nil {
		t.Fatal(err)
	}
	for name, header := range map[string]map[string]string{
		"demo key":   {"x-api-key": server.DemoProAPIKey},
		"plan claim": {"Authorization": "Bearer " + token},
	} {
		r := api.do(t, "GET", "/v1/items", header)
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", name, r.status, r.body)
		}
		policies, err := sfv.ParseList(r.header.Get("RateLimit-Policy"))
		if err != nil || len(policies) != 3 {
			t.Fatalf("%s: RateLimit-Policy %q: %v, want plan pro's three limits", name, r.header.Get("RateLimit-Policy"), err)
		}
		for i, want := range []string{"pro-1s", "pro-1m", "pro-1d"} {
			if policies[i].Value != want {
				t.Errorf("%s: policy %d is %v, want %s", name, i, policies[i].Value, want)
			}
		}
	}
}

// TestLocalAPIUsagePlanKeysOnMoto: `make local` with AWS_ENDPOINT_URL at a
// moto_server (README) knows the API keys of that API Gateway's usage plans,
// as a deployed stack knows its account's: a key of a usage plan of the
// local API's stage, tagged slidegate:plan=pro, answers with plan pro's
// limits; a key of no plan of that stage is refused; and the demo keys are
// not known.
func TestLocalAPIUsagePlanKeysOnMoto(t *testing.T) {
	account := mototest.Shared(t).Account(t)
	const proKey, otherKey = "local-moto-pro-key-0123456789", "local-moto-other-key-0123456789"
	plan := account.CreateUsagePlan(t, "Pro Monthly", map[string]string{"slidegate:plan": "pro"},
		mototest.Stage{APIID: "localapi", Stage: "dev"})
	account.AttachAPIKey(t, plan, account.CreateAPIKey(t, proKey, true))
	elsewhere := account.CreateUsagePlan(t, "pro", nil, mototest.Stage{APIID: "localapi", Stage: "prod"})
	account.AttachAPIKey(t, elsewhere, account.CreateAPIKey(t, otherKey, true))
	// The functions' SDK reads the process environment, as in Lambda.
	for k, v := range account.Env() {
		t.Setenv(k, v)
	}
	api := startLocalAPIWith(t, "dev", "", false, map[string]string{"API_KEY_HASHES": "", "AWS_ENDPOINT_URL": account.Endpoint})

	r := api.do(t, "GET", "/v1/items", map[string]string{"x-api-key": proKey})
	if r.status != http.StatusOK {
		t.Fatalf("key of the usage plan: %d %s", r.status, r.body)
	}
	policies, err := sfv.ParseList(r.header.Get("RateLimit-Policy"))
	if err != nil || len(policies) != 3 || policies[0].Value != "pro-1s" {
		t.Errorf("key of the usage plan: RateLimit-Policy %q (%v), want plan pro's three limits", r.header.Get("RateLimit-Policy"), err)
	}
	for _, key := range []string{otherKey, server.DemoProAPIKey} {
		if r := api.do(t, "GET", "/v1/items", map[string]string{"x-api-key": key}); r.status != http.StatusUnauthorized {
			t.Errorf("key %q (no usage plan of this stage): %d %s, want 401", key, r.status, r.body)
		}
	}
}
