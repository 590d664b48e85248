package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

func TestClientIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string
		want    string
	}{
		{name: "the peer, without trusted proxies", remote: "192.0.2.7:5555", want: "192.0.2.7"},
		{name: "X-Forwarded-For ignored without trusted proxies", remote: "192.0.2.7:5555", xff: []string{"198.51.100.1"}, want: "192.0.2.7"},
		{name: "X-Forwarded-For ignored from an untrusted peer", trusted: proxies, remote: "192.0.2.7:5555", xff: []string{"198.51.100.1"}, want: "192.0.2.7"},
		{name: "a trusted proxy's hop is the caller", trusted: proxies, remote: "10.1.2.3:443", xff: []string{"198.51.100.1"}, want: "198.51.100.1"},
		{name: "what a client wrote to the left is not read", trusted: proxies, remote: "10.1.2.3:443", xff: []string{"203.0.113.9, 198.51.100.1"}, want: "198.51.100.1"},
		{name: "trusted hops are skipped from the right", trusted: proxies, remote: "10.1.2.3:443", xff: []string{"198.51.100.1, 10.9.9.9", "10.8.8.8"}, want: "198.51.100.1"},
		{name: "a hop that does not parse ends the chain", trusted: proxies, remote: "10.1.2.3:443", xff: []string{"198.51.100.1, junk, 10.9.9.9"}, want: "10.9.9.9"},
		{name: "a trusted peer with no header is the caller", trusted: proxies, remote: "10.1.2.3:443", want: "10.1.2.3"},
		{name: "IPv6 by its /64", remote: "[2001:db8:1:2:3:4:5:6]:443", want: "2001:db8:1:2::/64"},
		{name: "IPv4-mapped IPv6 as IPv4", remote: "[::ffff:192.0.2.7]:443", want: "192.0.2.7"},
		{name: "an address that does not parse, as it is", remote: "@unix", want: "@unix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := httplimit.ClientIP(tt.trusted...)(r); got != tt.want {
				t.Errorf("ClientIP = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLimitOnRedis: the ready-made middleware admits a client's first
// requests with the headers, then answers 429 with Retry-After and the
// JSON body without calling the handler; with Redis stopped it still
// answers, from the local limit, marked degraded.
func TestLimitOnRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	gate, err := ratelimit.New(client)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	h := httplimit.Limit(gate, ratelimit.PerMinute(3), httplimit.Options{})(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		_, _ = w.Write([]byte("ok"))
	}))
	do := func(remote string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	for i := range 3 {
		rec := do("192.0.2.1:1000")
		if rec.Code != http.StatusOK || rec.Header().Get("RateLimit-Limit") != "3" {
			t.Fatalf("request %d: %d, RateLimit-Limit %q", i+1, rec.Code, rec.Header().Get("RateLimit-Limit"))
		}
	}
	rec := do("192.0.2.1:1001")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || rec.Header().Get("RateLimit-Remaining") != "0" {
		t.Fatalf("request 4: %d, Retry-After %q, RateLimit-Remaining %q", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("RateLimit-Remaining"))
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("429 Content-Type %q", ct)
	}
	if calls != 3 {
		t.Errorf("handler called %d times, want 3", calls)
	}
	if rec := do("192.0.2.2:1000"); rec.Code != http.StatusOK {
		t.Errorf("another client: %d, want 200", rec.Code)
	}

	srv.Stop()
	rec = do("192.0.2.3:1000")
	if rec.Code != http.StatusOK || rec.Header().Get("X-RateLimit-Degraded") != "true" {
		t.Errorf("Redis stopped: %d, X-RateLimit-Degraded %q, want 200 from the local limit", rec.Code, rec.Header().Get("X-RateLimit-Degraded"))
	}
}

// TestLimitForwardedByTheAuthorizer: behind slidegate's HTTP API authorizer
// (HttpApiDenials=forward), Limit answers the decision the authorizer's
// context describes, a denial with the same 429 and headers, and asks
// Redis nothing (the Gate here has no Redis: a decision of its own would
// be marked degraded); a fail-closed request the authorizer could not
// decide is a 503; a request without a context is decided by the Gate.
func TestLimitForwardedByTheAuthorizer(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	gate, err := ratelimit.New(client)
	if err != nil {
		t.Fatal(err)
	}
	denied := map[string]any{"tier": "anonymous", "limit": 30.0, "remaining": 0.0, "reset": 17.0, "window": 60.0,
		"name": "anonymous", "resetAt": 1_700_000_017.0, "retryAfter": 17.0, "retryIn": "17 seconds"}
	allowed := map[string]any{"tier": "anonymous", "limit": 30.0, "remaining": 12.0, "reset": 41.0, "window": 60.0, "name": "anonymous"}
	unavailable := map[string]any{"tier": "anonymous", "unavailable": true, "retryAfter": 1.0}
	tests := []struct {
		name        string
		ctx         map[string]any
		wantStatus  int
		wantHeaders map[string]string
	}{
		{"a forwarded denial", denied, http.StatusTooManyRequests, map[string]string{"Retry-After": "17", "RateLimit-Remaining": "0", "RateLimit-Limit": "30", "X-RateLimit-Degraded": ""}},
		{"a forwarded allowance", allowed, http.StatusOK, map[string]string{"RateLimit-Remaining": "12", "Retry-After": "", "X-RateLimit-Degraded": ""}},
		{"the authorizer could not decide a fail-closed route", unavailable, http.StatusServiceUnavailable, map[string]string{"Retry-After": "1"}},
		{"no context: decided here (Redis is out of reach)", nil, http.StatusOK, map[string]string{"X-RateLimit-Degraded": "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := httplimit.Limit(gate, ratelimit.PerMinute(30), httplimit.Options{
				Authorizer: func(*http.Request) map[string]any { return tt.ctx },
			})(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tt.wantStatus, rec.Body.String())
			}
			for name, want := range tt.wantHeaders {
				if got := rec.Header().Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}
