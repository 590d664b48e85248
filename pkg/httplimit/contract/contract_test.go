package contract_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

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
		if got := contract.SpecHeaderName(in); got != want {
			t.Errorf("SpecHeaderName(%q) = %q, want %q", in, got, want)
		}
	}
	// Every header SetHeaders writes comes back in the contract's spelling.
	h := http.Header{}
	httplimit.SetHeaders(h, ratelimit.Result{Decisions: []ratelimit.Decision{{Limit: ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}, RetryAfter: time.Second}}})
	spelled := map[string]bool{}
	for name := range h {
		spelled[contract.SpecHeaderName(name)] = true
	}
	for _, want := range []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if !spelled[want] {
			t.Errorf("%s missing after respelling: %v", want, spelled)
		}
	}
}

func TestTooManyRequestsBodyIsTheSpecBody(t *testing.T) {
	got := string(contract.TooManyRequestsBody(18))
	want := `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 18 seconds.","retry_after_seconds":18}}`
	if got != want {
		t.Fatalf("body\n got %s\nwant %s", got, want)
	}
	if one := string(contract.TooManyRequestsBody(0)); one != `{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 1 second.","retry_after_seconds":1}}` {
		t.Fatalf("body for 0 s: %s", one)
	}
	var parsed struct {
		Error struct {
			Code              string `json:"code"`
			RetryAfterSeconds int64  `json:"retry_after_seconds"`
		} `json:"error"`
	}
	if err := json.Unmarshal(contract.ServiceUnavailableBody(3), &parsed); err != nil {
		t.Fatal(err)
	}
	if parsed.Error.Code != "SERVICE_UNAVAILABLE" || parsed.Error.RetryAfterSeconds != 3 {
		t.Fatalf("503 body parsed as %+v", parsed)
	}
}
