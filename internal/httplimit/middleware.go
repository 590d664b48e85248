// Package httplimit is the net/http middleware that answers for
// slidegate's rate limits: the rate-limit headers of a decision
// (ratelimit.SetHeaders) on every limited response, and the product's
// 429, 503, 401 and 500 answers (package wire) when a request does not get
// through.
package httplimit

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/slidegate/slidegate/internal/edge"
	"github.com/slidegate/slidegate/internal/wire"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Verdict is what a Middleware's decide function reports about one request.
type Verdict struct {
	// Result is the decision over every limit that applies to the request.
	// Its closest decision (Result.Closest) is written to the response
	// headers. A Result with no decisions means the request is not rate
	// limited: it passes without headers.
	Result ratelimit.Result
	// Unauthorized is true when the request presented credentials that do
	// not verify. It was counted (against its source's anonymous limit),
	// and is answered as edge.KindOf says: 401 within that limit, 429
	// beyond it.
	Unauthorized bool
	// Enforced makes a denial a 429 even under ReportOnly: the decide
	// function spent from a limit of the reporting route itself (say, a
	// status endpoint's own limit per caller) and that limit denied. The
	// Result is then that denial.
	Enforced bool
	// Blocked refuses the request with 403 and wire.ForbiddenBody, no
	// rate-limit headers: its source network is blocked, whatever its
	// limits say.
	Blocked bool
	// Policy, when set, is the RateLimit-Policy value to send: every
	// policy that applies, where the Result may hold the closest decision
	// only (one rebuilt from an authorizer's context). Empty: every
	// enforced policy of the Result (ratelimit.SetHeaders).
	Policy string
}

// Limited reports whether the verdict is about at least one limit.
func (v Verdict) Limited() bool { return len(v.Result.Decisions) > 0 }

// Options configure a Middleware. The zero value is ready for
// production.
type Options struct {
	// ReportOnly lets a denied request through to the handler instead of
	// answering 429, still with the rate-limit headers (but no Retry-After).
	// It is meant for a decide function that peeks without spending, behind
	// a status endpoint such as GET /v1/quota, which should answer even when
	// the caller's budget is exhausted. Unauthorized and unavailable answers
	// are unchanged: an Unauthorized verdict never reaches the handler, and
	// is answered as without ReportOnly; so is an Enforced denial.
	ReportOnly bool
	// UnavailableRetryAfter is the Retry-After of the 503 answered when a
	// fail-closed request cannot be decided; DefaultUnavailableRetryAfter
	// when zero. It is rounded up to whole seconds, at least 1.
	UnavailableRetryAfter time.Duration
	// Logger receives one record per request that could not be decided;
	// slog.Default() when nil.
	Logger *slog.Logger
	// RouteName, when set, names a request in those records (as "route")
	// instead of its method and clipped path: a path can hold secrets, and
	// the caller knows a safer name (a route template). It must not panic.
	RouteName func(*http.Request) string
}

// DefaultUnavailableRetryAfter is how long a client is asked to wait after
// a fail-closed route could not be decided: about one circuit-breaker
// probe interval, short enough that a blip is not felt for long.
const DefaultUnavailableRetryAfter = time.Second

// The headers the middleware writes itself.
const (
	headerRetryAfter      = "Retry-After"
	headerRateLimitPolicy = "RateLimit-Policy"
)

// Middleware returns net/http middleware that rate-limits every request
// through decide, which is called once per request and is expected to spend
// the request's cost (or, with ReportOnly, to peek). The middleware knows
// nothing of where requests come from: decide does (API Gateway events,
// a local server, anything).
//
// The answer follows the request's edge.Kind (edge.KindOf of the verdict
// and decide's error):
//
//   - a Blocked verdict (edge.Blocked): 403 with wire.ForbiddenBody, no
//     rate-limit headers; the handler is not called.
//   - Unavailable (decide's error wraps ratelimit.ErrUnavailable: a
//     fail-closed route Redis could not decide): 503 with Retry-After and
//     wire.ServiceUnavailableBody; the handler is not called.
//   - Undecidable (any other error): 500 with a JSON body of code
//     INTERNAL_ERROR; the error is logged, never sent to the client.
//   - a verdict with no decisions: the handler is called, no headers
//     added.
//   - Denied, or Degraded and denied: 429 with the rate-limit headers of
//     the closest decision (ratelimit.SetHeaders), Retry-After and
//     wire.TooManyRequestsBody; the handler is not called. With ReportOnly
//     the handler is called instead, with the headers but no Retry-After,
//     unless the verdict is Enforced: that is a 429 with or without
//     ReportOnly.
//   - UnauthorizedOverLimit: the same 429, with or without ReportOnly.
//   - Unauthorized: 401 with the rate-limit headers and a JSON body of
//     code UNAUTHORIZED; the handler is not called.
//   - otherwise the handler is called with the rate-limit headers already
//     set on the response, and the verdict in the request's context
//     (VerdictFromContext).
//
// Every JSON body is written with Content-Type: application/json and
// Cache-Control: no-store, as API Gateway's own gateway responses are: a
// 429, 503, 401 or 500 is about one moment and one caller, and no cache
// may serve it to another.
func Middleware(decide func(*http.Request) (Verdict, error), opts Options) func(http.Handler) http.Handler {
	unavailableRetry := opts.UnavailableRetryAfter
	if unavailableRetry <= 0 {
		unavailableRetry = DefaultUnavailableRetryAfter
	}
	unavailableSeconds := ratelimit.RetryAfterSeconds(unavailableRetry)
	logger := opts.Logger
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			verdict, err := decide(r)
			if err == nil && verdict.Blocked {
				writeJSON(w, http.StatusForbidden, wire.ForbiddenBody())
				return
			}
			kind := edge.KindOf(verdict.Result, verdict.Unauthorized, err)
			switch kind {
			case edge.Unavailable:
				logFailure(logger, opts.RouteName, r, "rate limit undecided on a fail-closed route", err)
				w.Header().Set(headerRetryAfter, strconv.FormatInt(unavailableSeconds, 10))
				writeJSON(w, http.StatusServiceUnavailable, wire.ServiceUnavailableBody(unavailableSeconds))
				return
			case edge.Undecidable:
				logFailure(logger, opts.RouteName, r, "rate limit decision failed", err)
				writeJSON(w, http.StatusInternalServerError, wire.InternalErrorBody())
				return
			}
			if !verdict.Limited() {
				next.ServeHTTP(w, r)
				return
			}
			ratelimit.SetHeaders(w.Header(), verdict.Result)
			if verdict.Policy != "" {
				w.Header().Set(headerRateLimitPolicy, verdict.Policy)
			}
			switch {
			case kind == edge.UnauthorizedOverLimit || (!verdict.Result.Allowed && (!opts.ReportOnly || verdict.Enforced)):
				// Equal to the closest decision's t, which Closest picks
				// as the denial with the longest wait.
				retry := ratelimit.RetryAfterSeconds(verdict.Result.RetryAfter())
				w.Header().Set(headerRetryAfter, strconv.FormatInt(retry, 10))
				writeJSON(w, http.StatusTooManyRequests, wire.TooManyRequestsBody(retry))
				return
			case kind == edge.Unauthorized:
				w.Header().Del(headerRetryAfter)
				writeJSON(w, http.StatusUnauthorized, wire.UnauthorizedBody())
				return
			}
			// Retry-After means nothing on a response that lets the request
			// through (RFC 9110, section 10.2.3).
			w.Header().Del(headerRetryAfter)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verdictKey{}, verdict)))
		})
	}
}

// VerdictFromContext returns the verdict the Middleware reached for the
// request whose context ctx is, for handlers that report it (a quota
// endpoint, say). ok is false outside the middleware.
func VerdictFromContext(ctx context.Context) (v Verdict, ok bool) {
	v, ok = ctx.Value(verdictKey{}).(Verdict)
	return v, ok
}

type verdictKey struct{}

// maxLoggedError bounds the error text of a failure line: a decide
// function's error may quote what a caller sent.
const maxLoggedError = 512

// logFailure logs a request that could not be decided, named by
// routeName when set; otherwise the path is clipped, since a caller chooses
// it. The error is clipped too.
func logFailure(logger *slog.Logger, routeName func(*http.Request) string, r *http.Request, msg string, err error) {
	if logger == nil {
		logger = slog.Default()
	}
	if routeName != nil {
		logger.LogAttrs(r.Context(), slog.LevelError, msg,
			slog.String("route", truncate(routeName(r), 16+1+256)),
			slog.String("error", truncate(err.Error(), maxLoggedError)))
		return
	}
	logger.LogAttrs(r.Context(), slog.LevelError, msg,
		slog.String("method", truncate(r.Method, 16)),
		slog.String("path", truncate(r.URL.Path, 256)),
		slog.String("error", truncate(err.Error(), maxLoggedError)))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", wire.ContentTypeJSON)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client has gone; nothing left to tell it
}

// truncate shortens caller-chosen text before it goes into a log record.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
