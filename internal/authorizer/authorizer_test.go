package authorizer_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/app"
	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/redistest"
)

func newHandler(t testing.TB, redisURL string) *authorizer.Handler {
	t.Helper()
	env := map[string]string{
		"REDIS_URL":            redisURL,
		"RATE_LIMIT_ANONYMOUS": "2/1m",
		"API_KEY_HASHES":       "1f3fda5b3594c211778c561901737661ca21e8ebcf1ac1a3d60f006c470129f8",
		"JWT_ISSUER":           "https://auth.example.com/",
		"JWT_AUDIENCE":         "slidegate-example",
		"JWT_HS256_SECRET":     "slidegate-test-only-hs256-secret",
	}
	rt, err := app.NewRuntime(context.Background(), func(k string) string { return env[k] },
		app.Options{Logger: slog.New(slog.DiscardHandler)})
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
	h := newHandler(t, srv.URL())
	ev := events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", Type: "REQUEST"}
	ev.RequestContext.HTTP.Method = "GET"
	ev.RequestContext.HTTP.Path = "/prod/v1/items"
	ev.RequestContext.HTTP.SourceIP = "192.0.2.200"
	ev.RequestContext.Stage = "prod"
	var last events.APIGatewayV2CustomAuthorizerSimpleResponse
	for i := 0; i < 3; i++ {
		var err error
		last, err = h.HTTP(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
	}
	if !last.IsAuthorized || last.Context["retryAfter"] == nil {
		t.Errorf("third request: %+v, want authorized with retryAfter in the context", last)
	}
}

// TestFailClosedError: the fail-closed error is not "Unauthorized".
func TestFailClosedError(t *testing.T) {
	srv := redistest.StartServer(t)
	h := newHandler(t, srv.URL())
	srv.Stop()
	ev := events.APIGatewayCustomAuthorizerRequestTypeRequest{MethodArn: "arn:aws:execute-api:us-east-1:1:a/prod/POST/auth/login", Path: "/auth/login", HTTPMethod: "POST"}
	_, err := h.REST(context.Background(), ev)
	if err == nil || errors.Is(err, authorizer.ErrUnauthorized) || err.Error() == "Unauthorized" || !errors.Is(err, authorizer.ErrUnavailable) {
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
