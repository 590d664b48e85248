package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/cmd/localapi/server"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestMain silences go-redis's own dial errors, as main does: the broken
// stacks below fail to dial on purpose.
func TestMain(m *testing.M) {
	redis.SetLogger(observe.RedisLog{L: slog.New(slog.DiscardHandler)})
	os.Exit(m.Run())
}

// startLocal starts make local's server (cmd/localapi) on a free port with
// the environment env and returns its base URL.
func startLocal(t *testing.T, httpAPI bool, env map[string]string) string {
	t.Helper()
	srv, err := server.Start(context.Background(), server.Config{
		Addr: "127.0.0.1:0", Stage: "dev", HTTPAPI: httpAPI,
		TemplatePath: "../../template.yaml", SamconfigPath: "../../samconfig.toml",
		Getenv: func(name string) string { return env[name] },
		Logger: slog.New(slog.DiscardHandler), FunctionLogger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + srv.Addr()
}

// runVerifyCommand runs `slidegate verify` as main does and returns its
// exit status and output.
func runVerifyCommand(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, append([]string{"verify"}, args...), env{
		stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		getenv: func(string) string { return "" }, environ: func() []string { return nil },
	})
	return code, stdout.String() + stderr.String()
}

// verifyKey is the API key the tests set aside for verify: known (its
// hash in API_KEY_HASHES) on plan verify, of two requests a minute.
const verifyKey = "verify-key-set-aside"

// verifyKeyEnv is make local's environment with verifyKey set aside.
func verifyKeyEnv() map[string]string {
	return map[string]string{
		"API_KEY_HASHES":   identity.KeyHash(verifyKey) + ":verify",
		"RATE_LIMIT_PLANS": "verify=2/1m",
	}
}

// TestVerifyPassesAgainstMakeLocal: make local, as it starts (embedded
// Redis), passes every check, on the REST API (whose unknown routes API
// Gateway answers 403 itself) and on the HTTP API (the counted 404); the
// command says which unknown-route answer it saw. With a key set aside on
// a plan of two requests, it also sees the authorizer's 429 (on the REST
// API, the gateway's ACCESS_DENIED response); without one, it skips that
// check rather than spend an address's budget.
func TestVerifyPassesAgainstMakeLocal(t *testing.T) {
	cases := []struct {
		name    string
		httpAPI bool
		env     map[string]string
		args    []string
		unknown string
		denial  string
	}{
		{"REST API", false, nil, []string{"--api", "rest"}, "403 MISSING_AUTHENTICATION_TOKEN from API Gateway", "SKIP  authorizer denial (429)"},
		{"HTTP API", true, nil, []string{"--api", "http"}, "404 NOT_FOUND from the API function, counted", "SKIP  authorizer denial (429)"},
		{"REST API, type not given", false, nil, nil, "403 MISSING_AUTHENTICATION_TOKEN from API Gateway", "SKIP  authorizer denial (429)"},
		{"REST API, a key set aside", false, verifyKeyEnv(), []string{"--api-key", verifyKey}, "403 MISSING_AUTHENTICATION_TOKEN from API Gateway", "PASS  authorizer denial (429)    GET /v1/items: 429"},
		{"HTTP API, a key set aside", true, verifyKeyEnv(), []string{"--api-key", verifyKey, "--api", "http"}, "404 NOT_FOUND from the API function, counted", "PASS  authorizer denial (429)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := startLocal(t, c.httpAPI, c.env)
			code, out := runVerifyCommand(t, append([]string{"--url", base + "/"}, c.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d, want 0:\n%s", code, out)
			}
			for _, name := range []string{"reachable", "allowed answer", "API function on Redis", "denial (429)", "authorized route", "authorizer on Redis", "unknown route"} {
				if !strings.Contains(out, "PASS  "+name) {
					t.Errorf("no PASS for %q:\n%s", name, out)
				}
			}
			if !strings.Contains(out, c.unknown) || !strings.Contains(out, c.denial) || strings.Contains(out, "FAIL") {
				t.Errorf("want the unknown route reported as %q, %q, and no FAIL:\n%s", c.unknown, c.denial, out)
			}
		})
	}
}

// rewritingProxy is a proxy in front of base whose answers rewrite
// changes: a broken piece between the client and the stack.
func rewritingProxy(t *testing.T, base string, rewrite func(*http.Response) error) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = rewrite
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

// replaceBody sets a response's body.
func replaceBody(resp *http.Response, body string) {
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
}

// TestVerifyFailsNamingTheFault: a local stack broken one way at a time
// fails verify, on the check that names the fault, with its fix.
func TestVerifyFailsNamingTheFault(t *testing.T) {
	cases := []struct {
		name string
		// url builds the broken stack and returns its URL.
		url  func(t *testing.T) string
		args []string
		// fail is the failing check's line; fix a phrase of its fix.
		fail, fix string
	}{
		{
			name: "Redis stopped: the functions decide from the local fallback",
			url: func(t *testing.T) string {
				redis := redistest.StartServer(t)
				base := startLocal(t, false, map[string]string{"REDIS_URL": redis.URL()})
				redis.Kill()
				return base
			},
			fail: `FAIL  API function on Redis      GET /v1/quota: X-RateLimit-Degraded: true`,
			fix:  "the API function decides from its local fallback: it cannot reach Redis",
		},
		{
			name: "Redis stopped, the authorizer's answers",
			url: func(t *testing.T) string {
				redis := redistest.StartServer(t)
				base := startLocal(t, true, map[string]string{"REDIS_URL": redis.URL()})
				redis.Kill()
				return base
			},
			fail: "FAIL  authorizer on Redis        GET /v1/items: X-RateLimit-Degraded: true",
			fix:  "decides from its local fallback",
		},
		{
			name: "a proxy strips the rate-limit headers",
			url: func(t *testing.T) string {
				return rewritingProxy(t, startLocal(t, false, nil), func(resp *http.Response) error {
					for name := range resp.Header {
						if strings.Contains(strings.ToLower(name), "ratelimit") {
							resp.Header.Del(name)
						}
					}
					return nil
				})
			},
			fail: "FAIL  allowed answer             GET /v1/quota: 200, but missing RateLimit-Policy, RateLimit, RateLimit-Limit",
			fix:  "drops or rewrites the rate-limit headers",
		},
		{
			name: "a 429 whose body is not JSON",
			url: func(t *testing.T) string {
				return rewritingProxy(t, startLocal(t, false, nil), func(resp *http.Response) error {
					if resp.StatusCode == http.StatusTooManyRequests {
						replaceBody(resp, `{"error":{"code":"TOO_MANY_REQUESTS","retry_after_seconds":}}`)
					}
					return nil
				})
			},
			fail: "FAIL  denial (429)               GET /v1/quota: 429 after 10 calls, but the body is not valid JSON",
			fix:  "replaces error bodies",
		},
		{
			name: "a 429 without Retry-After",
			url: func(t *testing.T) string {
				return rewritingProxy(t, startLocal(t, true, nil), func(resp *http.Response) error {
					resp.Header.Del("Retry-After")
					return nil
				})
			},
			fail: `FAIL  denial (429)               GET /v1/quota: 429 after 10 calls, but Retry-After "" is not whole seconds`,
			fix:  "drops or rewrites the rate-limit headers",
		},
		{
			name: "unknown routes answered by something in between",
			url: func(t *testing.T) string {
				return rewritingProxy(t, startLocal(t, true, nil), func(resp *http.Response) error {
					if resp.StatusCode == http.StatusNotFound {
						resp.Header = http.Header{"Content-Type": {"text/html"}}
						replaceBody(resp, "<html>Not Found</html>")
					}
					return nil
				})
			},
			fail: "FAIL  unknown route              GET /slidegate-verify/no-such-route answered 404",
			fix:  "docs/contract.md documents the API function's counted 404",
		},
		{
			name: "the REST gateway's 429 loses its rate-limit headers",
			url: func(t *testing.T) string {
				return rewritingProxy(t, startLocal(t, false, verifyKeyEnv()), func(resp *http.Response) error {
					if resp.StatusCode == http.StatusTooManyRequests && resp.Request.URL.Path == verifyItemsPath {
						resp.Header.Del("RateLimit")
						resp.Header.Del("RateLimit-Policy")
					}
					return nil
				})
			},
			args: []string{"--api-key", verifyKey},
			fail: "FAIL  authorizer denial (429)    GET /v1/items: 429, but missing RateLimit-Policy, RateLimit",
			fix:  "drops or rewrites the rate-limit headers",
		},
		{
			name: "a REST API verified as an HTTP API",
			url:  func(t *testing.T) string { return startLocal(t, false, nil) },
			args: []string{"--api", "http"},
			fail: "FAIL  unknown route              GET /slidegate-verify/no-such-route: 403 Missing Authentication Token, a REST API's answer",
			fix:  "run with --api rest",
		},
		{
			name: "nothing listening at the URL",
			url: func(t *testing.T) string {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr := l.Addr().String()
				l.Close()
				return "http://" + addr
			},
			fail: "FAIL  reachable",
			fix:  "check --url",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := runVerifyCommand(t, append([]string{"--url", c.url(t)}, c.args...)...)
			if code != exitError {
				t.Fatalf("exit %d, want %d:\n%s", code, exitError, out)
			}
			if !strings.Contains(out, c.fail) || !strings.Contains(out, "fix: ") || !strings.Contains(out, c.fix) || !strings.Contains(out, "verify: FAILED") {
				t.Fatalf("want the line %q and a fix saying %q:\n%s", c.fail, c.fix, out)
			}
		})
	}
}

// TestVerifyCommandLine: a command line verify cannot run is a usage
// error, exit 2, that says what is wrong.
func TestVerifyCommandLine(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no URL", nil, "the API's URL is required"},
		{"not http", []string{"--url", "ftp://example.com"}, "want an http or https URL"},
		{"no host", []string{"--url", "https:///Prod"}, "want an http or https URL"},
		{"a query", []string{"--url", "https://example.com/Prod?x=1"}, "without a query"},
		{"bad API type", []string{"--url", "https://example.com", "--api", "websocket"}, "want auto, rest or http"},
		{"no quota calls", []string{"--url", "https://example.com", "--max-quota-calls", "0"}, "at least 1"},
		{"an argument", []string{"--url", "https://example.com", "extra"}, "unexpected argument"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := runVerifyCommand(t, c.args...)
			if code != exitUsage || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, want %d saying %q:\n%s", code, exitUsage, c.want, out)
			}
		})
	}
}

// TestHeaderProblems pins the header checks to docs/contract.md's
// formats, one fault at a time.
func TestHeaderProblems(t *testing.T) {
	good := func() http.Header {
		return http.Header{
			"Ratelimit-Policy":      {`"pro-1s";q=20;w=1, "pro-1m";q=100;w=60, "a,\"b";q=5;w=60`},
			"Ratelimit":             {`"pro-1s";r=0;t=18`},
			"Ratelimit-Limit":       {"20"},
			"Ratelimit-Remaining":   {"0"},
			"Ratelimit-Reset":       {"18"},
			"X-Ratelimit-Limit":     {"20"},
			"X-Ratelimit-Remaining": {"0"},
			"X-Ratelimit-Reset":     {"1767225641"},
			"Retry-After":           {"18"},
			"Cache-Control":         {"no-store"},
		}
	}
	cases := []struct {
		name   string
		change func(http.Header)
		denied bool
		want   string // "" for no problem
	}{
		{"a denial as the contract says", func(http.Header) {}, true, ""},
		{"an allowed answer as the contract says", func(h http.Header) { h.Del("Retry-After"); h.Del("Cache-Control") }, false, ""},
		{"Retry-After on an allowed answer", func(http.Header) {}, false, "Retry-After on an answer that let the request through"},
		{"a missing header", func(h http.Header) { h.Del("X-Ratelimit-Reset") }, true, "missing X-RateLimit-Reset"},
		{"a policy item without a window", func(h http.Header) { h.Set("Ratelimit-Policy", `"pro";q=20`) }, true, `RateLimit-Policy item "\"pro\";q=20"`},
		{"RateLimit not a quoted name", func(h http.Header) { h.Set("Ratelimit", `pro;r=0;t=18`) }, true, "is not \"name\";r=N;t=N"},
		{"a count that is not an integer", func(h http.Header) { h.Set("X-Ratelimit-Limit", "20.5") }, true, `X-RateLimit-Limit "20.5" is not an integer`},
		{"X- and draft headers disagree", func(h http.Header) { h.Set("X-Ratelimit-Remaining", "3") }, true, "RateLimit-Remaining 0 differs from X-RateLimit-Remaining 3"},
		{"t is not RateLimit-Reset", func(h http.Header) { h.Set("Ratelimit-Reset", "17") }, true, "RateLimit t=18 differs from RateLimit-Reset 17"},
		{"Retry-After zero", func(h http.Header) { h.Set("Retry-After", "0") }, true, `Retry-After "0" is not whole seconds of at least 1`},
		{"Retry-After not t", func(h http.Header) { h.Set("Retry-After", "19") }, true, "Retry-After 19 differs from RateLimit t=18"},
		{"a cacheable denial", func(h http.Header) { h.Del("Cache-Control") }, true, `Cache-Control is "", not no-store`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := good()
			c.change(h)
			got := strings.Join(headerProblems(h, c.denied), "; ")
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("problems %q, want %q", got, c.want)
			}
		})
	}
}
