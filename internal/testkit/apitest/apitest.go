// Package apitest runs the API function in-process, as its main builds it
// (one instance.Runtime, the handler, the Lambda entry point), builds its
// events from those in events/, and checks its answers against
// docs/contract.md: the 429 and the rate-limit headers. It is test
// support: no code that ships imports it.
package apitest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/apihandler"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/internal/testkit/sfv"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// KnownKey is the API key the API tests configure as known (tier org).
const KnownKey = "slidegate-example-api-key-0001"

// Env is the environment of an API function under test: the defaults
// of the contract, Redis at url, KnownKey known, then overrides.
func Env(url string, overrides map[string]string) map[string]string {
	sum := sha256.Sum256([]byte(KnownKey))
	env := map[string]string{
		"REDIS_URL":      url,
		"REDIS_TIMEOUT":  "100ms",
		"API_KEY_HASHES": hex.EncodeToString(sum[:]),
	}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// Start builds the API function in-process, as its main does: one
// Runtime, the handler, the Lambda entry point.
func Start(t testing.TB, env map[string]string) *apihandler.LambdaHandler {
	t.Helper()
	return StartLogging(t, env, io.Discard)
}

// StartLogging is Start with the function's standard output written
// to logs: its JSON log lines and its EMF metrics records, as in Lambda.
func StartLogging(t testing.TB, env map[string]string, logs io.Writer) *apihandler.LambdaHandler {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] }, instance.Options{Logger: logger, Metrics: logs})
	if err != nil {
		t.Fatalf("new runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return apihandler.NewLambdaHandler(apihandler.New(rt, apihandler.Options{Logger: logger}), logger)
}

// Response is an API Gateway proxy response (v1 or v2) as the client
// would see it.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       string
}

// Invoke hands payload to the Lambda entry point and reads the answer
// back from its JSON, as the Lambda runtime would send it.
func Invoke(t testing.TB, h *apihandler.LambdaHandler, payload []byte) Response {
	t.Helper()
	out, err := h.Invoke(context.Background(), payload)
	if err != nil {
		t.Fatalf("invoke returned an error: %v", err)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("marshal response: %v", err)
	}
	return Parse(t, raw)
}

// Parse reads a v1 or v2 proxy response.
func Parse(t testing.TB, raw []byte) Response {
	t.Helper()
	var proxy struct {
		StatusCode        int                 `json:"statusCode"`
		Headers           map[string]string   `json:"headers"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
		Body              string              `json:"body"`
		IsBase64Encoded   bool                `json:"isBase64Encoded"`
	}
	if err := json.Unmarshal(raw, &proxy); err != nil {
		t.Fatalf("response is not a proxy response: %v: %s", err, raw)
	}
	// The JSON maps are read exactly by clients: the rate-limit headers must
	// be spelled as the contract spells them, not in Go's canonical form.
	for k := range proxy.Headers {
		if spec := contract.SpecHeaderName(k); spec != k {
			t.Errorf("response header %q: the contract spells it %q", k, spec)
		}
	}
	for k := range proxy.MultiValueHeaders {
		if spec := contract.SpecHeaderName(k); spec != k {
			t.Errorf("response multi-value header %q: the contract spells it %q", k, spec)
		}
	}
	resp := Response{StatusCode: proxy.StatusCode, Header: http.Header{}, Body: proxy.Body}
	for k, v := range proxy.Headers {
		resp.Header.Set(k, v)
	}
	for k, vs := range proxy.MultiValueHeaders {
		resp.Header.Del(k)
		for _, v := range vs {
			resp.Header.Add(k, v)
		}
	}
	if proxy.IsBase64Encoded {
		body, err := base64.StdEncoding.DecodeString(proxy.Body)
		if err != nil {
			t.Fatalf("base64 body: %v", err)
		}
		resp.Body = string(body)
	}
	return resp
}

// ReadEvent returns the bytes of events/<name>.
func ReadEvent(t testing.TB, name string) []byte {
	t.Helper()
	root, err := lambdatest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "events", name))
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	return b
}

// RESTEvent is events/api-rest-anonymous.json changed by edit.
func RESTEvent(t testing.TB, edit func(e *events.APIGatewayProxyRequest)) []byte {
	t.Helper()
	var e events.APIGatewayProxyRequest
	if err := json.Unmarshal(ReadEvent(t, "api-rest-anonymous.json"), &e); err != nil {
		t.Fatal(err)
	}
	edit(&e)
	// API Gateway keeps the two in step; edits name only the resource.
	e.RequestContext.ResourcePath = e.Resource
	return JSON(t, e)
}

// HTTPAPIEvent is events/api-httpapi-v2.json changed by edit.
func HTTPAPIEvent(t testing.TB, edit func(e *events.APIGatewayV2HTTPRequest)) []byte {
	t.Helper()
	var e events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(ReadEvent(t, "api-httpapi-v2.json"), &e); err != nil {
		t.Fatal(err)
	}
	edit(&e)
	return JSON(t, e)
}

// SetRESTHeader sets a header in both header maps of a REST event, as API
// Gateway fills them.
func SetRESTHeader(e *events.APIGatewayProxyRequest, name, value string) {
	if e.Headers == nil {
		e.Headers = map[string]string{}
	}
	if e.MultiValueHeaders == nil {
		e.MultiValueHeaders = map[string][]string{}
	}
	e.Headers[name] = value
	e.MultiValueHeaders[name] = []string{value}
}

// JSON is v as JSON.
func JSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// specBody429 is the contract's 429 body with its number left open.
var specBody429 = regexp.MustCompile(`^\{"error":\{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded\. Try again in ([0-9]+) seconds?\.","retry_after_seconds":([0-9]+)\}\}$`)

// Check429 asserts a contract 429: Retry-After of at least 1 second, equal to
// the RateLimit header's t and to the body's number, and the body byte for
// byte.
func Check429(t testing.TB, resp Response) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429; body %s", resp.StatusCode, resp.Body)
	}
	retry, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	if err != nil || retry < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds >= 1", resp.Header.Get("Retry-After"))
	}
	if want := string(contract.TooManyRequestsBody(retry)); resp.Body != want {
		t.Fatalf("429 body\n got %s\nwant %s", resp.Body, want)
	}
	m := specBody429.FindStringSubmatch(resp.Body)
	if m == nil || m[1] != strconv.FormatInt(retry, 10) || m[2] != m[1] {
		t.Fatalf("429 body does not have the contract's shape with %d seconds: %s", retry, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("429 Content-Type = %q", ct)
	}
	if got := resp.Header.Get("RateLimit"); !regexp.MustCompile(`;t=` + strconv.FormatInt(retry, 10) + `$`).MatchString(got) {
		t.Fatalf("RateLimit %q disagrees with Retry-After %d", got, retry)
	}
	CheckRateLimitHeaders(t, resp)
}

// rateLimitHeaderNames are the headers the contract puts on every limited response.
var rateLimitHeaderNames = []string{
	"RateLimit-Policy", "RateLimit",
	"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
}

// CheckRateLimitHeaders asserts every contract header is present and that the
// three families agree.
func CheckRateLimitHeaders(t testing.TB, resp Response) {
	t.Helper()
	for _, name := range rateLimitHeaderNames {
		if resp.Header.Get(name) == "" {
			t.Fatalf("limited response (status %d) lacks %s; headers %v", resp.StatusCode, name, resp.Header)
		}
	}
	h := resp.Header
	if h.Get("RateLimit-Limit") != h.Get("X-RateLimit-Limit") || h.Get("RateLimit-Remaining") != h.Get("X-RateLimit-Remaining") {
		t.Fatalf("RateLimit-* and X-RateLimit-* disagree: %v", h)
	}
	// RateLimit-Policy lists every policy that applies; the one RateLimit
	// names is among them, with the quota RateLimit-Limit says.
	policies, err := sfv.ParseList(h.Get("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy: %v", err)
	}
	closest, err := sfv.ParseList(h.Get("RateLimit"))
	if err != nil || len(closest) != 1 {
		t.Fatalf("RateLimit %q: %v", h.Get("RateLimit"), err)
	}
	limit, _ := strconv.ParseInt(h.Get("RateLimit-Limit"), 10, 64)
	listed := false
	for _, p := range policies {
		q, _ := p.Param("q")
		if _, ok := p.Param("w"); ok && p.Value == closest[0].Value && q == limit {
			listed = true
		}
	}
	if !listed {
		t.Fatalf("RateLimit-Policy %q does not list %v with limit %s", h.Get("RateLimit-Policy"), closest[0].Value, h.Get("RateLimit-Limit"))
	}
	rl := regexp.MustCompile(`^"[^"]*";r=` + h.Get("RateLimit-Remaining") + `;t=` + h.Get("RateLimit-Reset") + `$`)
	if !rl.MatchString(h.Get("RateLimit")) {
		t.Fatalf("RateLimit %q disagrees with RateLimit-Remaining/-Reset %s/%s", h.Get("RateLimit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset"))
	}
}

// RedisKeyCount is the number of keys in srv's database.
func RedisKeyCount(t testing.TB, srv *redistest.Server) int64 {
	t.Helper()
	n, err := srv.Client(t).DBSize(context.Background()).Result()
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	return n
}
