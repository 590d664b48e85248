package httplimit_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// FuzzHeaders: whatever a limit's name and a decision's numbers hold,
// SetHeaders never panics and never writes a header value that could split
// a header or a response: no CR, LF or NUL, printable ASCII only.
func FuzzHeaders(f *testing.F) {
	f.Add("anonymous", int64(30), int64(60_000), int64(12), int64(41_000_000), int64(0), false)
	f.Add("x\r\nSet-Cookie: a=b", int64(1), int64(1), int64(0), int64(0), int64(1), false)
	f.Add("\"quoted\\\"", int64(-5), int64(-1), int64(-9), int64(-1), int64(-1), true)
	f.Add("ünïcødé\x00\x7f", int64(1<<62), int64(1<<62), int64(1<<62), int64(1<<62), int64(1<<62), false)
	f.Fuzz(func(t *testing.T, name string, count, windowMicros, remaining, resetMicros, retryMicros int64, allowed bool) {
		d := ratelimit.Decision{
			Limit:      ratelimit.Limit{Name: name, Count: count, Window: time.Duration(windowMicros) * time.Microsecond},
			Allowed:    allowed,
			Remaining:  remaining,
			ResetAfter: time.Duration(resetMicros) * time.Microsecond,
			RetryAfter: time.Duration(retryMicros) * time.Microsecond,
			At:         time.UnixMicro(windowMicros ^ resetMicros),
		}
		h := http.Header{}
		httplimit.SetHeaders(h, ratelimit.Result{Allowed: allowed, Decisions: []ratelimit.Decision{d}})
		for key, values := range h {
			for _, v := range values {
				for i := 0; i < len(v); i++ {
					if c := v[i]; c < 0x20 || c > 0x7e {
						t.Fatalf("header %s carries byte %#x: %q", key, c, v)
					}
				}
			}
		}
		if !allowed {
			if ra := h.Get("Retry-After"); ra == "" || strings.HasPrefix(ra, "-") || ra == "0" {
				t.Fatalf("denial with Retry-After %q, want at least 1", ra)
			}
		}
	})
}
