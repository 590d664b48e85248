package ratelimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"
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

// CeilSeconds rounds a duration up to whole seconds; negative becomes 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// RetryAfterSeconds is the Retry-After value for a wait: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(CeilSeconds(d), 1)
}

// ResetSeconds is the "t" of the RateLimit header and RateLimit-Reset: for
// an admitted request, the seconds until the limit is entirely unused
// again; for a denied one, the seconds until the request would be admitted,
// the same value as its Retry-After, so that a client honouring either
// header comes back at the same moment.
func ResetSeconds(d Decision) int64 {
	if !d.Allowed {
		return RetryAfterSeconds(d.RetryAfter)
	}
	return CeilSeconds(d.ResetAfter)
}

// PolicyHeader is the RateLimit-Policy value of a limit, e.g.
// `"anonymous";q=30;w=60` (draft-ietf-httpapi-ratelimit-headers-10).
func PolicyHeader(l Limit) string {
	return sfString(l.Name) + ";q=" + strconv.FormatInt(l.Count, 10) + ";w=" + strconv.FormatInt(CeilSeconds(l.Window), 10)
}

// RateLimitHeader is the RateLimit value of a decision, e.g.
// `"anonymous";r=12;t=41`.
func RateLimitHeader(d Decision) string {
	return sfString(d.Limit.Name) + ";r=" + strconv.FormatInt(d.Remaining, 10) + ";t=" + strconv.FormatInt(ResetSeconds(d), 10)
}

// SetHeaders writes the rate-limit headers of d, the decision closest to
// denying (Result.Closest), into h: the IETF draft's RateLimit-Policy and
// RateLimit, the older RateLimit-Limit/-Remaining/-Reset (seconds) and
// X-RateLimit-Limit/-Remaining/-Reset (Unix seconds), and Retry-After when
// d denies.
func SetHeaders(h http.Header, d Decision) {
	reset := ResetSeconds(d)
	limit := strconv.FormatInt(d.Limit.Count, 10)
	remaining := strconv.FormatInt(d.Remaining, 10)
	h.Set(headerRateLimitPolicy, PolicyHeader(d.Limit))
	h.Set(headerRateLimit, RateLimitHeader(d))
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

// sfString renders a policy name as a Structured Field string: quoted,
// with '"' and '\' escaped and anything outside printable ASCII replaced, so
// a header can never be split or corrupted by a name.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
