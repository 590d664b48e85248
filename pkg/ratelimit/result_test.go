package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// TestResultRetryAfter: the longest enforced denial, shadow denials passed
// over.
func TestResultRetryAfter(t *testing.T) {
	tier := Decision{Limit: Limit{Name: "user"}, Allowed: true, Remaining: 500, ResetAfter: time.Minute}
	deniedShort := Decision{Limit: Limit{Name: "a"}, RetryAfter: time.Second}
	deniedLong := Decision{Limit: Limit{Name: "b"}, RetryAfter: time.Hour}
	shadowDenied := Decision{Limit: Limit{Name: "trial"}, RetryAfter: 2 * time.Hour, Shadow: true}
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
