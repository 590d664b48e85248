package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

func TestSetHeaders(t *testing.T) {
	at := time.Unix(1_700_000_000, 250_000_000)
	anonymous := ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}
	tests := []struct {
		name     string
		decision ratelimit.Decision
		want     map[string]string
	}{
		{
			name:     "allowed",
			decision: ratelimit.Decision{Limit: anonymous, Allowed: true, Remaining: 12, ResetAfter: 40*time.Second + time.Millisecond, At: at},
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
			decision: ratelimit.Decision{Limit: anonymous, Allowed: false, Remaining: 0, ResetAfter: 90 * time.Second, RetryAfter: 17*time.Second + time.Microsecond, At: at},
			want: map[string]string{
				"RateLimit":       `"anonymous";r=0;t=18`,
				"RateLimit-Reset": "18",
				"Retry-After":     "18",
			},
		},
		{
			name:     "denied for under a second: at least 1",
			decision: ratelimit.Decision{Limit: anonymous, RetryAfter: time.Microsecond, At: at},
			want:     map[string]string{"Retry-After": "1", "RateLimit": `"anonymous";r=0;t=1`},
		},
		{
			name:     "route names are quoted and escaped",
			decision: ratelimit.Decision{Limit: ratelimit.Limit{Name: "POST /auth/* \"x\"\n", Count: 5, Window: 10 * time.Second}, Allowed: true, Remaining: 4, At: at},
			want:     map[string]string{"RateLimit-Policy": `"POST /auth/* \"x\"_";q=5;w=10`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			SetHeaders(h, ratelimit.Result{Allowed: tt.decision.Allowed, Decisions: []ratelimit.Decision{tt.decision}})
			for name, want := range tt.want {
				if got := h.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestSetHeadersSeveralLimits: RateLimit-Policy lists every enforced limit
// of a result once, in order; the other headers describe the closest.
func TestSetHeadersSeveralLimits(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	anonymous := ratelimit.Decision{Limit: ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}, Allowed: true, Remaining: 20, ResetAfter: 20 * time.Second, At: at}
	login := ratelimit.Decision{Limit: ratelimit.Limit{Name: "POST /auth/*", Count: 5, Window: 15 * time.Minute}, Allowed: true, Remaining: 2, ResetAfter: 41 * time.Second, At: at}
	loginAgain := ratelimit.Decision{Limit: ratelimit.Limit{Name: "POST /auth/*", Count: 50, Window: time.Hour}, Allowed: true, Remaining: 40, ResetAfter: time.Hour, At: at}
	trial := ratelimit.Decision{Limit: ratelimit.Limit{Name: "trial", Count: 1, Window: time.Second}, Remaining: 0, RetryAfter: time.Second, At: at, Shadow: true}
	denied := ratelimit.Decision{Limit: ratelimit.Limit{Name: "daily", Count: 1000, Window: 24 * time.Hour}, Remaining: 0, ResetAfter: time.Hour, RetryAfter: 90 * time.Second, At: at}
	tests := []struct {
		name string
		res  ratelimit.Result
		want map[string]string
	}{
		{
			name: "admitted: every policy, the closest's numbers",
			res:  ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{anonymous, login}},
			want: map[string]string{
				"RateLimit-Policy":    `"anonymous";q=30;w=60, "POST /auth/*";q=5;w=900`,
				"RateLimit":           `"POST /auth/*";r=2;t=41`,
				"RateLimit-Limit":     "5",
				"RateLimit-Remaining": "2",
				"Retry-After":         "",
			},
		},
		{
			name: "a name twice is listed once, shadows not at all",
			res:  ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{trial, login, anonymous, loginAgain}},
			want: map[string]string{"RateLimit-Policy": `"POST /auth/*";q=5;w=900, "anonymous";q=30;w=60`, "RateLimit": `"POST /auth/*";r=2;t=41`},
		},
		{
			name: "denied: the denial is the closest",
			res:  ratelimit.Result{Decisions: []ratelimit.Decision{anonymous, denied}},
			want: map[string]string{"RateLimit-Policy": `"anonymous";q=30;w=60, "daily";q=1000;w=86400`, "RateLimit": `"daily";r=0;t=90`, "Retry-After": "90"},
		},
		{
			name: "only shadows: the closest of them",
			res:  ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{trial}},
			want: map[string]string{"RateLimit-Policy": `"trial";q=1;w=1`, "RateLimit": `"trial";r=0;t=1`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			SetHeaders(h, tt.res)
			for name, want := range tt.want {
				if got := h.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if got := PolicyHeader(tt.res); got != h.Get("RateLimit-Policy") {
				t.Errorf("PolicyHeader = %q, SetHeaders wrote %q", got, h.Get("RateLimit-Policy"))
			}
		})
	}
	h := http.Header{}
	SetHeaders(h, ratelimit.Result{})
	if len(h) != 0 {
		t.Errorf("SetHeaders of a result without decisions wrote %v", h)
	}
}

func TestClosest(t *testing.T) {
	tier := ratelimit.Decision{Limit: ratelimit.Limit{Name: "user"}, Allowed: true, Remaining: 500, ResetAfter: time.Minute}
	route := ratelimit.Decision{Limit: ratelimit.Limit{Name: "login"}, Allowed: true, Remaining: 2, ResetAfter: time.Minute}
	deniedShort := ratelimit.Decision{Limit: ratelimit.Limit{Name: "a"}, RetryAfter: time.Second}
	deniedLong := ratelimit.Decision{Limit: ratelimit.Limit{Name: "b"}, RetryAfter: time.Hour}
	shadowDenied := ratelimit.Decision{Limit: ratelimit.Limit{Name: "trial"}, RetryAfter: 2 * time.Hour, Shadow: true}
	shadowLow := ratelimit.Decision{Limit: ratelimit.Limit{Name: "trial-low"}, Allowed: true, Remaining: 1, ResetAfter: time.Hour, Shadow: true}
	tests := []struct {
		name string
		in   []ratelimit.Decision
		want string
	}{
		{"fewest remaining", []ratelimit.Decision{tier, route}, "login"},
		{"a denial beats any allowance", []ratelimit.Decision{route, deniedShort}, "a"},
		{"the longest denial", []ratelimit.Decision{deniedShort, tier, deniedLong}, "b"},
		{"empty", nil, ""},
		{"a shadow denial is passed over", []ratelimit.Decision{shadowDenied, tier, route}, "login"},
		{"a shadow allowance is passed over", []ratelimit.Decision{tier, shadowLow}, "user"},
		{"an enforced denial beats a longer shadow one", []ratelimit.Decision{shadowDenied, deniedShort}, "a"},
		{"only shadows: the closest of them", []ratelimit.Decision{shadowLow, shadowDenied}, "trial"},
	}
	for _, tt := range tests {
		if got := Closest(ratelimit.Result{Decisions: tt.in}).Limit.Name; got != tt.want {
			t.Errorf("%s: Closest = %q, want %q", tt.name, got, tt.want)
		}
	}
}
