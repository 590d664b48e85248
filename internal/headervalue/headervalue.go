// Package headervalue formats the values of the rate-limit headers
// (draft-ietf-httpapi-ratelimit-headers-10, and the older RateLimit-* and
// Retry-After), as docs/contract.md ("Headers") gives them.
//
// ratelimit.SetHeaders writes them into an http.Header; the authorizer,
// which cannot set response headers itself, passes the same values through
// its context (internal/wire wraps these functions for that). Both format
// them here, so that a response carries the same bytes whichever way it
// was built.
package headervalue

import (
	"strconv"
	"strings"
	"time"
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
// again (resetAfter); for a denied one, the seconds until the request would
// be admitted (retryAfter), the same value as its Retry-After, so that a
// client honouring either header comes back at the same moment.
func ResetSeconds(allowed bool, retryAfter, resetAfter time.Duration) int64 {
	if !allowed {
		return RetryAfterSeconds(retryAfter)
	}
	return CeilSeconds(resetAfter)
}

// Policy is the RateLimit-Policy value of a limit named name of count units
// per window, e.g. `"anonymous";q=30;w=60`.
func Policy(name string, count int64, window time.Duration) string {
	return sfString(name) + ";q=" + strconv.FormatInt(count, 10) + ";w=" + strconv.FormatInt(CeilSeconds(window), 10)
}

// RateLimit is the RateLimit value of a decision on the limit named name,
// e.g. `"anonymous";r=12;t=41`; resetSeconds is its ResetSeconds.
func RateLimit(name string, remaining, resetSeconds int64) string {
	return sfString(name) + ";r=" + strconv.FormatInt(remaining, 10) + ";t=" + strconv.FormatInt(resetSeconds, 10)
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
