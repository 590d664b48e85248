package httplimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Header names written by SetHeaders, spelled as the IETF draft and the
// older conventions spell them.
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

// SetHeaders writes the rate-limit headers of r into h. RateLimit-Policy
// lists every limit r enforces ([PolicyHeader]); the other headers
// describe the decision closest to denying ([Closest]):
//
//	RateLimit-Policy: "anonymous";q=30;w=60, "login";q=5;w=900   (draft-ietf-httpapi-ratelimit-headers-10)
//	RateLimit: "login";r=2;t=41                                  (RateLimitHeader)
//	RateLimit-Limit: 5
//	RateLimit-Remaining: 2
//	RateLimit-Reset: 41                                          (seconds, ResetSeconds)
//	X-RateLimit-Limit: 5
//	X-RateLimit-Remaining: 2
//	X-RateLimit-Reset: 1700000042                                (Unix seconds, on the decision's At clock)
//	Retry-After: 41                                              (only when the closest decision denies)
//
// A policy name is a quoted Structured Field string: double quotes and
// backslashes are escaped and any byte outside printable ASCII becomes an
// underscore, so no name can split a header. w is the window in seconds,
// rounded up ([WindowSeconds]). t and RateLimit-Reset are, for an
// admitted request, the seconds until the limit is entirely unused again
// (ResetAfter, rounded up); for a denied one, the seconds until the
// request would be admitted (RetryAfter, rounded up, at least 1), the same
// value as Retry-After, so that a client honouring either header comes
// back at the same moment. A Result without decisions writes nothing.
//
// For a single [ratelimit.Decision], pass
// ratelimit.Result{Allowed: d.Allowed, Decisions: []ratelimit.Decision{d}}.
func SetHeaders(h http.Header, r ratelimit.Result) {
	if len(r.Decisions) == 0 {
		return
	}
	d := Closest(r)
	reset := ResetSeconds(d)
	limit := strconv.FormatInt(d.Limit.Count, 10)
	remaining := strconv.FormatInt(d.Remaining, 10)
	h.Set(headerRateLimitPolicy, PolicyHeader(r))
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

// PolicyHeader returns the RateLimit-Policy value of r: the policy of
// every enforced limit, in the order of r.Decisions, each name once (the
// first limit of a name stands for it), e.g.
// `"anonymous";q=30;w=60, "login";q=5;w=900`. Shadow limits are left out:
// they deny no one, and a client should not pace itself by them. When
// every decision is a shadow one, it is the policy of [Closest]
// alone; "" when r has no decisions.
//
// It is what SetHeaders writes, for code that carries the value other than
// in an http.Header.
func PolicyHeader(r ratelimit.Result) string {
	var b strings.Builder
	seen := make(map[string]bool, len(r.Decisions))
	for _, d := range r.Decisions {
		if d.Shadow || seen[d.Limit.Name] {
			continue
		}
		seen[d.Limit.Name] = true
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		writePolicy(&b, d.Limit)
	}
	if b.Len() == 0 && len(r.Decisions) > 0 {
		writePolicy(&b, Closest(r).Limit)
	}
	return b.String()
}

// RateLimitHeader returns the RateLimit value of d, e.g.
// `"anonymous";r=12;t=41`: its limit's name, its Remaining and its
// ResetSeconds. It is what SetHeaders writes for the closest decision.
func RateLimitHeader(d ratelimit.Decision) string {
	var b strings.Builder
	writeSFString(&b, d.Limit.Name)
	b.WriteString(";r=")
	b.WriteString(strconv.FormatInt(d.Remaining, 10))
	b.WriteString(";t=")
	b.WriteString(strconv.FormatInt(ResetSeconds(d), 10))
	return b.String()
}

// ResetSeconds is the t of d's RateLimit header and its RateLimit-Reset:
// when d admits, the seconds until its limit is entirely unused again
// (ResetAfter, rounded up, 0 when already unused); when it denies, the
// seconds until the request would be admitted, RetryAfterSeconds of its
// RetryAfter, the value of its Retry-After.
func ResetSeconds(d ratelimit.Decision) int64 {
	if !d.Allowed {
		return RetryAfterSeconds(d.RetryAfter)
	}
	return ceilSeconds(d.ResetAfter)
}

// RetryAfterSeconds is the Retry-After value of a wait: whole seconds,
// rounded up, at least 1 (Retry-After: 0 would invite a retry at once).
// SetHeaders writes it for a denial; it is exported for answers that
// carry a wait of their own, such as a 503 while Redis is unreachable.
func RetryAfterSeconds(wait time.Duration) int64 {
	return max(ceilSeconds(wait), 1)
}

// WindowSeconds is l's Window in whole seconds, rounded up: the w of its
// RateLimit-Policy.
func WindowSeconds(l ratelimit.Limit) int64 {
	return ceilSeconds(l.Window)
}

// ceilSeconds rounds a duration up to whole seconds; negative becomes 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// writePolicy writes the RateLimit-Policy item of l, e.g.
// `"anonymous";q=30;w=60`.
func writePolicy(b *strings.Builder, l ratelimit.Limit) {
	writeSFString(b, l.Name)
	b.WriteString(";q=")
	b.WriteString(strconv.FormatInt(l.Count, 10))
	b.WriteString(";w=")
	b.WriteString(strconv.FormatInt(WindowSeconds(l), 10))
}

// writeSFString writes a policy name as a Structured Field string: quoted,
// with '"' and '\' escaped and anything outside printable ASCII replaced,
// so a header can never be split or corrupted by a name.
func writeSFString(b *strings.Builder, s string) {
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
}

// resetUnix is the Unix second of the reset, on the clock the decision was
// made with (Redis's), rounded up.
func resetUnix(d ratelimit.Decision, resetSeconds int64) int64 {
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

// Closest returns the decision whose limit is closest to denying, the one
// response headers describe: for a denied request the denying limit with the
// longest RetryAfter; otherwise the limit with the fewest units remaining
// (ties go to the one that resets later).
//
// Shadow decisions are passed over, so the headers describe the limits that
// are enforced, whatever a shadow limit would have said. Only when every
// decision is a shadow one is the closest of them returned, with its own
// answer (which may be a denial of a request that was admitted).
func Closest(r ratelimit.Result) ratelimit.Decision {
	if len(r.Decisions) == 0 {
		return ratelimit.Decision{}
	}
	best, found := r.Decisions[0], !r.Decisions[0].Shadow
	for _, d := range r.Decisions[1:] {
		switch {
		case d.Shadow && found:
		case !d.Shadow && !found:
			best, found = d, true
		case closer(d, best):
			best = d
		}
	}
	return best
}

// closer reports whether a is closer to denying than b.
func closer(a, b ratelimit.Decision) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		return a.RetryAfter > b.RetryAfter
	}
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}
