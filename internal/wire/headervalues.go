package wire

import (
	"time"

	"github.com/slidegate/slidegate/internal/headervalue"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// The values of the rate-limit headers, for the product code that carries
// them other than in an http.Header: the authorizer's context (which the
// gateway responses read), the API function's JSON quota, the decision
// log, the operator CLI. ratelimit.SetHeaders writes the same values, from
// the same formatting (internal/headervalue).

// CeilSeconds rounds a duration up to whole seconds; negative becomes 0.
func CeilSeconds(d time.Duration) int64 { return headervalue.CeilSeconds(d) }

// RetryAfterSeconds is the Retry-After value for a wait: whole seconds,
// rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int64 { return headervalue.RetryAfterSeconds(d) }

// ResetSeconds is the "t" of the RateLimit header and RateLimit-Reset: for
// an admitted request, the seconds until the limit is entirely unused
// again; for a denied one, the seconds until the request would be admitted,
// the same value as its Retry-After, so that a client honouring either
// header comes back at the same moment.
func ResetSeconds(d ratelimit.Decision) int64 {
	return headervalue.ResetSeconds(d.Allowed, d.RetryAfter, d.ResetAfter)
}

// PolicyHeader is the RateLimit-Policy value of a limit, e.g.
// `"anonymous";q=30;w=60` (draft-ietf-httpapi-ratelimit-headers-10).
func PolicyHeader(l ratelimit.Limit) string {
	return headervalue.Policy(l.Name, l.Count, l.Window)
}

// RateLimitHeader is the RateLimit value of a decision, e.g.
// `"anonymous";r=12;t=41`.
func RateLimitHeader(d ratelimit.Decision) string {
	return headervalue.RateLimit(d.Limit.Name, d.Remaining, ResetSeconds(d))
}
