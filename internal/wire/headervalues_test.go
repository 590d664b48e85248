package wire

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestHeaderValuesMatchSetHeaders: the values the authorizer carries in its
// context are the bytes ratelimit.SetHeaders writes for the same decision.
func TestHeaderValuesMatchSetHeaders(t *testing.T) {
	at := time.Unix(1_700_000_000, 250_000_000)
	anonymous := ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}
	tests := []struct {
		name string
		d    ratelimit.Decision
	}{
		{"allowed", ratelimit.Decision{Limit: anonymous, Allowed: true, Remaining: 12, ResetAfter: 40*time.Second + time.Millisecond, At: at}},
		{"denied", ratelimit.Decision{Limit: anonymous, Remaining: 0, ResetAfter: 90 * time.Second, RetryAfter: 17*time.Second + time.Microsecond, At: at}},
		{"denied for under a second", ratelimit.Decision{Limit: anonymous, RetryAfter: time.Microsecond, At: at}},
		{"odd name, sub-second window", ratelimit.Decision{Limit: ratelimit.Limit{Name: "POST /auth/* \"x\"\n", Count: 5, Window: 1500 * time.Millisecond}, Allowed: true, Remaining: 4, At: at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			ratelimit.SetHeaders(h, tt.d)
			want := map[string]string{
				"RateLimit-Policy": PolicyHeader(tt.d.Limit),
				"RateLimit":        RateLimitHeader(tt.d),
				"RateLimit-Reset":  strconv.FormatInt(ResetSeconds(tt.d), 10),
			}
			if !tt.d.Allowed {
				want["Retry-After"] = strconv.FormatInt(RetryAfterSeconds(tt.d.RetryAfter), 10)
			}
			for name, v := range want {
				if got := h.Get(name); got != v {
					t.Errorf("SetHeaders wrote %s: %q; wire says %q", name, got, v)
				}
			}
			if got, want := CeilSeconds(tt.d.Limit.Window), int64((tt.d.Limit.Window+time.Second-1)/time.Second); got != want {
				t.Errorf("CeilSeconds(%s) = %d, want %d", tt.d.Limit.Window, got, want)
			}
		})
	}
}
