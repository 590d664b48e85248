package ratelimit

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSetHeaders(t *testing.T) {
	at := time.Unix(1_700_000_000, 250_000_000)
	anonymous := Limit{Name: "anonymous", Count: 30, Window: time.Minute}
	tests := []struct {
		name     string
		decision Decision
		want     map[string]string
	}{
		{
			name:     "allowed",
			decision: Decision{Limit: anonymous, Allowed: true, Remaining: 12, ResetAfter: 40*time.Second + time.Millisecond, At: at},
			want: map[string]string{
				"RateLimit-Policy":      `"anonymous";q=30;w=60`,
				"RateLimit":             `"anonymous";r=12;t=41`,
				"RateLimit-Limit":       "30",
				"RateLimit-Remaining":   "12",
				"RateLimit-Reset":       "41",
				"X-RateLimit-Limit":     "30",
				"X-RateLimit-Remaining": "12",
				"X-RateLimit-Reset":     "1700000042",
				"Retry-After":           "",
			},
		},
		{
			name:     "denied: t and Retry-After agree, rounded up",
			decision: Decision{Limit: anonymous, Allowed: false, Remaining: 0, ResetAfter: 90 * time.Second, RetryAfter: 17*time.Second + time.Microsecond, At: at},
			want: map[string]string{
				"RateLimit":       `"anonymous";r=0;t=18`,
				"RateLimit-Reset": "18",
				"Retry-After":     "18",
			},
		},
		{
			name:     "denied for under a second: at least 1",
			decision: Decision{Limit: anonymous, RetryAfter: time.Microsecond, At: at},
			want:     map[string]string{"Retry-After": "1", "RateLimit": `"anonymous";r=0;t=1`},
		},
		{
			name:     "route names are quoted and escaped",
			decision: Decision{Limit: Limit{Name: "POST /auth/* \"x\"\n", Count: 5, Window: 10 * time.Second}, Allowed: true, Remaining: 4, At: at},
			want:     map[string]string{"RateLimit-Policy": `"POST /auth/* \"x\"_";q=5;w=10`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			SetHeaders(h, tt.decision)
			for name, want := range tt.want {
				if got := h.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestSpecHeaderName(t *testing.T) {
	tests := map[string]string{
		"Ratelimit-Policy":      "RateLimit-Policy",
		"ratelimit":             "RateLimit",
		"RATELIMIT-REMAINING":   "RateLimit-Remaining",
		"X-Ratelimit-Reset":     "X-RateLimit-Reset",
		"x-ratelimit-limit":     "X-RateLimit-Limit",
		"Retry-After":           "Retry-After",
		"Content-Type":          "Content-Type",
		"X-Ratelimit-Something": "X-Ratelimit-Something",
	}
	for in, want := range tests {
		if got := SpecHeaderName(in); got != want {
			t.Errorf("SpecHeaderName(%q) = %q, want %q", in, got, want)
		}
	}
	// Every header SetHeaders writes comes back in the contract's spelling.
	h := http.Header{}
	SetHeaders(h, Decision{Limit: Limit{Name: "anonymous", Count: 30, Window: time.Minute}, RetryAfter: time.Second})
	spelled := map[string]bool{}
	for name := range h {
		spelled[SpecHeaderName(name)] = true
	}
	for _, want := range []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if !spelled[want] {
			t.Errorf("%s missing after respelling: %v", want, spelled)
		}
	}
}

func TestTooManyRequestsBodyIsTheSpecBody(t *testing.T) {
	got := string(TooManyRequestsBody(18))
	want := `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 18 seconds.","retry_after_seconds":18}}`
	if got != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	if one := string(TooManyRequestsBody(0)); one != `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 1 second.","retry_after_seconds":1}}` {
		t.Fatalf("body for 0 s: %s", one)
	}
	var parsed struct {
		Error struct {
			Code              string `json:"code"`
			RetryAfterSeconds int64  `json:"retry_after_seconds"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ServiceUnavailableBody(3), &parsed); err != nil {
		t.Fatal(err)
	}
	if parsed.Error.Code != "SERVICE_UNAVAILABLE" || parsed.Error.RetryAfterSeconds != 3 {
		t.Fatalf("503 body parsed as %+v", parsed)
	}
}

func TestClosest(t *testing.T) {
	tier := Decision{Limit: Limit{Name: "user"}, Allowed: true, Remaining: 500, ResetAfter: time.Minute}
	route := Decision{Limit: Limit{Name: "login"}, Allowed: true, Remaining: 2, ResetAfter: time.Minute}
	deniedShort := Decision{Limit: Limit{Name: "a"}, RetryAfter: time.Second}
	deniedLong := Decision{Limit: Limit{Name: "b"}, RetryAfter: time.Hour}
	tests := []struct {
		name string
		in   []Decision
		want string
	}{
		{"fewest remaining", []Decision{tier, route}, "login"},
		{"a denial beats any allowance", []Decision{route, deniedShort}, "a"},
		{"the longest denial", []Decision{deniedShort, tier, deniedLong}, "b"},
		{"empty", nil, ""},
	}
	for _, tt := range tests {
		if got := (Result{Decisions: tt.in}).Closest().Limit.Name; got != tt.want {
			t.Errorf("%s: Closest = %q, want %q", tt.name, got, tt.want)
		}
	}
	r := Result{Decisions: []Decision{deniedShort, deniedLong, tier}}
	if r.RetryAfter() != time.Hour {
		t.Errorf("RetryAfter = %s, want the longest denial", r.RetryAfter())
	}
}

func TestNewClientKeepsPasswordsOutOfErrors(t *testing.T) {
	_, err := NewClient(ClientConfig{URL: "redis://user:hunter2@[::1"})
	if err == nil {
		t.Fatal("malformed URL accepted")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("password leaked: %v", err)
	}
}
