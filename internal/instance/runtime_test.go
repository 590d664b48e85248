package instance_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

const (
	testKey    = "test-api-key-0123456789"
	testSecret = "test-only-hs256-secret-0123456789"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func newRuntime(t *testing.T, url string, extra map[string]string) (*instance.Runtime, *bytes.Buffer) {
	t.Helper()
	vars := map[string]string{
		"REDIS_URL":            url,
		"RATE_LIMIT_ANONYMOUS": "3/1m",
		"RATE_LIMIT_USER":      "5/1m",
		"RATE_LIMIT_ORG":       "7/1m",
		"RATE_LIMIT_ROUTES":    "POST /auth/*=2/1m",
		"API_KEY_HASHES":       identity.KeyHash(testKey),
		"JWT_ISSUER":           "https://issuer.test",
		"JWT_AUDIENCE":         "slidegate-test",
		"JWT_HS256_SECRET":     testSecret,
		"REDIS_TIMEOUT":        "200ms",
	}
	for k, v := range extra {
		vars[k] = v
	}
	var logs bytes.Buffer
	rt, err := instance.NewRuntime(context.Background(), env(vars), instance.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("NewRuntime: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt, &logs
}

func signToken(t *testing.T, sub, secret string, exp time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "https://issuer.test", "aud": "slidegate-test", "sub": sub, "exp": exp.Unix(),
	})
	s, err := tok.SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// admitted counts how many of n identical requests are allowed.
func admitted(t *testing.T, rt *instance.Runtime, req apigw.Request, n int) (int, apigw.Outcome) {
	t.Helper()
	var last apigw.Outcome
	ok := 0
	for i := 0; i < n; i++ {
		o, err := rt.Decide(context.Background(), req)
		if err != nil {
			t.Fatalf("Decide #%d: %v", i, err)
		}
		if o.Result.Allowed {
			ok++
		}
		last = o
	}
	return ok, last
}

func TestDecideTiers(t *testing.T) {
	srv := redistest.StartServer(t)
	rt, _ := newRuntime(t, srv.URL(), nil)
	cases := []struct {
		name         string
		req          apigw.Request
		wantTier     string
		wantAdmitted int
		unauthorized bool
	}{
		{"anonymous counted per source IP", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.1"}, identity.TierAnonymous, 3, false},
		{"known API key gets the org limit", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.2", Headers: map[string]string{"x-api-key": testKey}}, identity.TierOrg, 7, false},
		{"verified JWT gets the user limit", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.3", Headers: map[string]string{"authorization": "Bearer " + signToken(t, "user-1", testSecret, time.Now().Add(time.Hour))}}, identity.TierUser, 5, false},
		{"unknown API key is unauthorized and counted as the IP", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.4", Headers: map[string]string{"x-api-key": "nope"}}, identity.TierAnonymous, 3, true},
		{"forged token is unauthorized and counted as the IP", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.5", Headers: map[string]string{"authorization": "Bearer " + signToken(t, "user-1", "wrong", time.Now().Add(time.Hour))}}, identity.TierAnonymous, 3, true},
		{"expired token is unauthorized", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.6", Headers: map[string]string{"authorization": "Bearer " + signToken(t, "user-1", testSecret, time.Now().Add(-time.Hour))}}, identity.TierAnonymous, 3, true},
		{"route limit applies on top of the tier", apigw.Request{Method: "POST", Path: "/auth/login", SourceIP: "198.51.100.7"}, identity.TierAnonymous, 2, false},
		{"stage variable overrides the tier limit", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.8", StageVariables: map[string]string{"rateLimitAnonymous": "4/1m"}}, identity.TierAnonymous, 4, false},
		{"X-Forwarded-For is ignored", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.9", Headers: map[string]string{"x-forwarded-for": "203.0.113.1"}}, identity.TierAnonymous, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, last := admitted(t, rt, tc.req, 10)
			if got != tc.wantAdmitted {
				t.Errorf("admitted %d of 10, want %d", got, tc.wantAdmitted)
			}
			if last.Caller.Tier != tc.wantTier || last.Unauthorized() != tc.unauthorized {
				t.Errorf("tier %q unauthorized %v, want %q %v", last.Caller.Tier, last.Unauthorized(), tc.wantTier, tc.unauthorized)
			}
			if ra := last.Result.RetryAfter(); ra < time.Millisecond {
				t.Errorf("denied with RetryAfter %v", ra)
			}
		})
	}
}

func TestAuthorizerContextRoundTrip(t *testing.T) {
	srv := redistest.StartServer(t)
	rt, _ := newRuntime(t, srv.URL(), nil)
	req := apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "192.0.2.1"}
	for i := 0; i < 4; i++ {
		o, err := rt.Decide(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		ctx := apigw.AuthorizerContext(o)
		// As REST API Gateway may deliver it: every value a string.
		asStrings := make(map[string]any, len(ctx))
		for k, v := range ctx {
			asStrings[k] = fmt.Sprint(v)
		}
		for _, c := range []map[string]any{ctx, asStrings} {
			back, ok := apigw.FromAuthorizerContext(c)
			if !ok || len(back.Result.Decisions) != 1 {
				t.Fatalf("FromAuthorizerContext(%v) = %+v, %v; want one decision", c, back, ok)
			}
			d := back.Result.Decisions[0]
			want := httplimit.Closest(o.Result)
			if d.Allowed != want.Allowed || d.Remaining != want.Remaining || d.Limit.Count != want.Limit.Count || d.Limit.Name != want.Limit.Name {
				t.Errorf("round trip: got %+v, want %+v", d, want)
			}
			got, exp := headersOf(d), headersOf(want)
			for k := range exp {
				if got[k] != exp[k] {
					t.Errorf("header %s: %q after round trip, %q before", k, got[k], exp[k])
				}
			}
		}
		for key, want := range map[string]string{"RateLimit": "rateLimit", "RateLimit-Policy": "policy"} {
			if ctx[want] != headersOf(httplimit.Closest(o.Result))[http.CanonicalHeaderKey(key)] {
				t.Errorf("context %s = %v, want the %s header %q", want, ctx[want], key, headersOf(httplimit.Closest(o.Result))[http.CanonicalHeaderKey(key)])
			}
		}
		if !o.Result.Allowed {
			if ra, ok := ctx["retryAfter"].(int64); !ok || ra < 1 {
				t.Errorf("denied context retryAfter = %v", ctx["retryAfter"])
			}
		}
	}
}

func headersOf(d ratelimit.Decision) map[string]string {
	h := make(map[string][]string)
	httplimit.SetHeaders(h, ratelimit.Result{Allowed: d.Allowed, Decisions: []ratelimit.Decision{d}})
	out := make(map[string]string)
	for k, v := range h {
		out[k] = strings.Join(v, ",")
	}
	return out
}

func TestRedisDown(t *testing.T) {
	srv := redistest.StartServer(t)
	rt, logs := newRuntime(t, srv.URL(), nil)
	srv.Stop()
	cases := []struct {
		name       string
		req        apigw.Request
		wantErr    bool
		wantDegrad bool
	}{
		{"normal route degrades to the local fallback", apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "192.0.2.9"}, false, true},
		{"fail-closed route fails", apigw.Request{Method: "POST", Path: "/auth/login", SourceIP: "192.0.2.9"}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := rt.Decide(context.Background(), tc.req)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ratelimit.ErrUnavailable) {
				t.Errorf("err %v does not wrap ErrUnavailable", err)
			}
			if o.Result.Degraded != tc.wantDegrad {
				t.Errorf("degraded = %v, want %v", o.Result.Degraded, tc.wantDegrad)
			}
		})
	}
	if strings.Contains(logs.String(), testKey) || strings.Contains(logs.String(), testSecret) {
		t.Error("logs contain a credential")
	}
}

// TestResolutionCountsOneCaller: a Resolution's decision and its
// in-flight slots count the caller resolved once, for that request; a
// resolution of another request counts its own caller, never the first's.
func TestResolutionCountsOneCaller(t *testing.T) {
	srv := redistest.StartServer(t)
	rt, _ := newRuntime(t, srv.URL(), map[string]string{"RATE_LIMIT_CONCURRENCY": "anonymous=1,user=1"})
	ctx := context.Background()
	first := apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.61"}
	token := signToken(t, "user-61", testSecret, time.Now().Add(time.Hour))
	other := apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.61", Headers: map[string]string{"authorization": "Bearer " + token}}

	res := rt.Resolve(ctx, first)
	if out, err := res.Decide(ctx); err != nil || out.Caller.Tier != identity.TierAnonymous {
		t.Fatalf("decide: %+v, %v", out.Caller, err)
	}
	held, err := res.Acquire(ctx)
	if err != nil || held.Denied || held.Release == nil {
		t.Fatalf("acquire for the resolved request: %+v, %v", held, err)
	}
	defer held.Release(ctx)
	// The anonymous caller's one slot is taken by the first resolution;
	// the user's is free, once.
	if again, err := rt.Resolve(ctx, first).Acquire(ctx); err != nil || !again.Denied {
		t.Fatalf("the anonymous caller's second request: %+v, %v; want it refused (the first took its slot)", again, err)
	}
	user, err := rt.Resolve(ctx, other).Acquire(ctx)
	if err != nil || user.Denied {
		t.Fatalf("the user: %+v, %v; want its slot free", user, err)
	}
	defer user.Release(ctx)
	if again, err := rt.Resolve(ctx, other).Acquire(ctx); err != nil || !again.Denied {
		t.Fatalf("the user's second request: %+v, %v; want it refused", again, err)
	}
}

// TestStageRestartWarningLogged: a stage whose variables give a limit
// another window or algorithm than the environment's starts its callers
// afresh; the instance says so, naming the limit, when it first reads
// them, as slidegate check does (config.RestartWarnings). A changed count
// keeps the counts and is not warned about.
func TestStageRestartWarningLogged(t *testing.T) {
	srv := redistest.StartServer(t)
	rt, logs := newRuntime(t, srv.URL(), nil)
	req := apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.20"}
	const msg = "configuration starts callers afresh"

	req.StageVariables = map[string]string{"rateLimitAnonymous": "9/1m"}
	if _, err := rt.Decide(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), msg) {
		t.Errorf("a changed count was warned about:\n%s", logs)
	}

	req.StageVariables = map[string]string{"rateLimitAnonymous": "3/1h"}
	for range 2 {
		if _, err := rt.Decide(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	var warned []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, msg) {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], `limit \"anonymous\"`) {
		t.Errorf("want one warning naming the anonymous limit, got %q", warned)
	}
}
