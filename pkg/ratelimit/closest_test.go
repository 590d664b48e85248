package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

func TestClosest(t *testing.T) {
	tier := Decision{Limit: Limit{Name: "user"}, Allowed: true, Remaining: 500, ResetAfter: time.Minute}
	route := Decision{Limit: Limit{Name: "login"}, Allowed: true, Remaining: 2, ResetAfter: time.Minute}
	deniedShort := Decision{Limit: Limit{Name: "a"}, RetryAfter: time.Second}
	deniedLong := Decision{Limit: Limit{Name: "b"}, RetryAfter: time.Hour}
	shadowDenied := Decision{Limit: Limit{Name: "trial"}, RetryAfter: 2 * time.Hour, Shadow: true}
	shadowLow := Decision{Limit: Limit{Name: "trial-low"}, Allowed: true, Remaining: 1, ResetAfter: time.Hour, Shadow: true}
	tests := []struct {
		name string
		in   []Decision
		want string
	}{
		{"fewest remaining", []Decision{tier, route}, "login"},
		{"a denial beats any allowance", []Decision{route, deniedShort}, "a"},
		{"the longest denial", []Decision{deniedShort, tier, deniedLong}, "b"},
		{"empty", nil, ""},
		{"a shadow denial is passed over", []Decision{shadowDenied, tier, route}, "login"},
		{"a shadow allowance is passed over", []Decision{tier, shadowLow}, "user"},
		{"an enforced denial beats a longer shadow one", []Decision{shadowDenied, deniedShort}, "a"},
		{"only shadows: the closest of them", []Decision{shadowLow, shadowDenied}, "trial"},
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
	r = Result{Decisions: []Decision{deniedShort, shadowDenied}}
	if r.RetryAfter() != time.Second {
		t.Errorf("RetryAfter = %s, want the enforced denial's, not the shadow one's", r.RetryAfter())
	}
}

func TestNewClientKeepsPasswordsOutOfErrors(t *testing.T) {
	_, err := redisclient.New(redisclient.Config{URL: "redis://user:hunter2@[::1"})
	if err == nil {
		t.Fatal("malformed URL accepted")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("password leaked: %v", err)
	}
}
