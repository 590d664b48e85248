package ratelimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/slidegate/slidegate/internal/headervalue"
)

// Header names written by SetHeaders, spelled as docs/contract.md
// ("Headers") spells them.
const (
	headerRateLimitPolicy    = "RateLimit-Policy"
	headerRateLimit          = "RateLimit"
	headerRateLimitLimit     = "RateLimit-Limit"
	headerRateLimitRemaining = "RateLimit-Remaining"
	headerRateLimitReset     = "RateLimit-Reset"
	headerXRateLimitLimit    = "X-RateLimit-Limit"
	headerXRateLimitRemain   = "X-RateLimit-Remaining"
	headerXRateLimitReset    = "X-RateLimit-Reset"
	headerRetryAfter         = "Retry-After"
)

// SetHeaders writes the rate-limit headers of d, the decision closest to
// denying (Result.Closest), into h: the IETF draft's RateLimit-Policy and
// RateLimit, the older RateLimit-Limit/-Remaining/-Reset (seconds) and
// X-RateLimit-Limit/-Remaining/-Reset (Unix seconds), and Retry-After when
// d denies.
func SetHeaders(h http.Header, d Decision) {
	reset := headervalue.ResetSeconds(d.Allowed, d.RetryAfter, d.ResetAfter)
	limit := strconv.FormatInt(d.Limit.Count, 10)
	remaining := strconv.FormatInt(d.Remaining, 10)
	h.Set(headerRateLimitPolicy, headervalue.Policy(d.Limit.Name, d.Limit.Count, d.Limit.Window))
	h.Set(headerRateLimit, headervalue.RateLimit(d.Limit.Name, d.Remaining, reset))
	h.Set(headerRateLimitLimit, limit)
	h.Set(headerRateLimitRemaining, remaining)
	h.Set(headerRateLimitReset, strconv.FormatInt(reset, 10))
	h.Set(headerXRateLimitLimit, limit)
	h.Set(headerXRateLimitRemain, remaining)
	h.Set(headerXRateLimitReset, strconv.FormatInt(resetUnix(d, reset), 10))
	if !d.Allowed {
		h.Set(headerRetryAfter, strconv.FormatInt(reset, 10))
	}
}

// resetUnix is the Unix second of the reset, on the clock the decision was
// made with (Redis's), rounded up.
func resetUnix(d Decision, resetSeconds int64) int64 {
	at := d.At
	if at.IsZero() {
		at = time.Now()
	}
	unix := at.Unix()
	if at.Nanosecond() > 0 {
		unix++
	}
	return unix + resetSeconds
}
