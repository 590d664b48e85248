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
	HeaderRateLimitPolicy    = "RateLimit-Policy"
	HeaderRateLimit          = "RateLimit"
	HeaderRateLimitLimit     = "RateLimit-Limit"
	HeaderRateLimitRemaining = "RateLimit-Remaining"
	HeaderRateLimitReset     = "RateLimit-Reset"
	HeaderXRateLimitLimit    = "X-RateLimit-Limit"
	HeaderXRateLimitRemain   = "X-RateLimit-Remaining"
	HeaderXRateLimitReset    = "X-RateLimit-Reset"
	HeaderRetryAfter         = "Retry-After"
	// HeaderCacheControl is set to no-store on every answer the
	// Middleware writes itself.
	HeaderCacheControl = "Cache-Control"
)

// SpecHeaderName returns the spelling the contract (docs/contract.md) gives a rate-limit header
// ("RateLimit-Policy", "X-RateLimit-Reset") for any spelling of its name,
// and any other name unchanged. net/http stores header names in its
// canonical form ("Ratelimit-Policy"); HTTP names are case-insensitive, but
// a Lambda proxy response's headers are a JSON map that clients and tests
// index exactly, so the functions respell them at the edge.
func SpecHeaderName(name string) string {
	switch http.CanonicalHeaderKey(name) {
	case "Ratelimit-Policy":
		return HeaderRateLimitPolicy
	case "Ratelimit":
		return HeaderRateLimit
	case "Ratelimit-Limit":
		return HeaderRateLimitLimit
	case "Ratelimit-Remaining":
		return HeaderRateLimitRemaining
	case "Ratelimit-Reset":
		return HeaderRateLimitReset
	case "X-Ratelimit-Limit":
		return HeaderXRateLimitLimit
	case "X-Ratelimit-Remaining":
		return HeaderXRateLimitRemain
	case "X-Ratelimit-Reset":
		return HeaderXRateLimitReset
	}
	return name
}

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
	h.Set(HeaderRateLimitPolicy, PolicyHeader(d.Limit))
	h.Set(HeaderRateLimit, RateLimitHeader(d))
	h.Set(HeaderRateLimitLimit, limit)
	h.Set(HeaderRateLimitRemaining, remaining)
	h.Set(HeaderRateLimitReset, strconv.FormatInt(reset, 10))
	h.Set(HeaderXRateLimitLimit, limit)
	h.Set(HeaderXRateLimitRemain, remaining)
	h.Set(HeaderXRateLimitReset, strconv.FormatInt(resetUnix(d, reset), 10))
	if !d.Allowed {
		h.Set(HeaderRetryAfter, strconv.FormatInt(reset, 10))
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

// Error codes of the JSON bodies, whose bytes docs/contract.md ("Bodies")
// gives.
const (
	CodeTooManyRequests    = "TOO_MANY_REQUESTS"
	CodeServiceUnavailable = "SERVICE_UNAVAILABLE"
)

// TooManyRequestsBody is the JSON body of a 429, e.g.
//
//	{"error":{"code":"TOO_MANY_REQUESTS","message":"Rate limit exceeded. Try again in 18 seconds.","retry_after_seconds":18}}
//
// retryAfterSeconds should be the response's Retry-After value.
func TooManyRequestsBody(retryAfterSeconds int64) []byte {
	return errorBody(CodeTooManyRequests, "Rate limit exceeded.", retryAfterSeconds)
}

// ServiceUnavailableBody is the JSON body of the 503 of a fail-closed route
// that could not be decided.
func ServiceUnavailableBody(retryAfterSeconds int64) []byte {
	return errorBody(CodeServiceUnavailable, "Rate limiting is temporarily unavailable.", retryAfterSeconds)
}

// RetryPhrase is how the JSON bodies say a wait: "18 seconds", "1 second".
// The authorizer passes it in its context so that the gateway response's
// body, which cannot branch, reads the same as the API function's.
func RetryPhrase(seconds int64) string {
	seconds = max(seconds, 1)
	if seconds == 1 {
		return "1 second"
	}
	return strconv.FormatInt(seconds, 10) + " seconds"
}

func errorBody(code, sentence string, seconds int64) []byte {
	seconds = max(seconds, 1)
	n := strconv.FormatInt(seconds, 10)
	var b strings.Builder
	b.Grow(128)
	b.WriteString(`{"error":{"code":"`)
	b.WriteString(code)
	b.WriteString(`","message":"`)
	b.WriteString(sentence)
	b.WriteString(" Try again in ")
	b.WriteString(RetryPhrase(seconds))
	b.WriteString(".")
	b.WriteString(`","retry_after_seconds":`)
	b.WriteString(n)
	b.WriteString("}}")
	return []byte(b.String())
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
