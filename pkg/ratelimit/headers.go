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

// SetHeaders writes the rate-limit headers of d, usually the decision
// closest to denying (Result.Closest), into h:
//
//	RateLimit-Policy: "anonymous";q=30;w=60     (draft-ietf-httpapi-ratelimit-headers-10)
//	RateLimit: "anonymous";r=12;t=41
//	RateLimit-Limit: 30
//	RateLimit-Remaining: 12
//	RateLimit-Reset: 41                          (seconds)
//	X-RateLimit-Limit: 30
//	X-RateLimit-Remaining: 12
//	X-RateLimit-Reset: 1700000042                (Unix seconds, on d.At's clock)
//	Retry-After: 41                              (only when d denies)
//
// The policy name is a quoted Structured Field string: double quotes and
// backslashes are escaped and any byte outside printable ASCII becomes an
// underscore, so no name can split a header. w is the window in seconds,
// rounded up. t and RateLimit-Reset are, for an admitted request, the
// seconds until the limit is entirely unused again (ResetAfter, rounded
// up); for a denied one, the seconds until the request would be admitted
// (RetryAfter, rounded up, at least 1), the same value as Retry-After, so
// that a client honouring either header comes back at the same moment.
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
