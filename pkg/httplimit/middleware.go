// Package httplimit is net/http middleware for pkg/ratelimit's decisions:
// the rate-limit headers of a decision (SetHeaders) on every
// limited response, and the 429, 503, 401, 403 and 500 answers of
// docs/contract.md (their bodies: package contract) when a request does not get
// through.
//
// Limit is the common case: one limit per caller, the caller named by its
// address (ClientIP, which reads X-Forwarded-For only from proxies it is
// told to trust), failing open to the Gate's local limit; behind
// slidegate's HTTP API authorizer it answers the authorizer's forwarded
// decision instead (Options.Authorizer, FromAuthorizerContext). Middleware
// answers any decide function's outcome: slidegate's own API function is
// built on it.
package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// Options configure a Middleware. The zero value is ready for
// production.
type Options struct {
	// ReportOnly lets a denied request through to the handler instead of
	// answering 429, still with the rate-limit headers (but no Retry-After).
	// It is meant for a decide function that peeks without spending, behind
	// a status endpoint such as GET /v1/quota, which should answer even when
	// the caller's budget is exhausted. Unauthorized and unavailable answers
	// are unchanged: an unauthorized outcome never reaches the handler, and
	// is answered as without ReportOnly; so is a QuotaDenied outcome.
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
	// Key names the caller a request is counted against, for Limit only;
	// ClientIP() when nil. Middleware's decide function names its own.
	Key func(*http.Request) string
	// Authorizer, for Limit only, returns the context slidegate's
	// authorizer gave a request (nil for none), whose decision Limit then
	// answers instead of deciding again. With aws-lambda-go-api-proxy
	// behind an HTTP API: core.GetAPIGatewayV2ContextFromContext(r.Context())
	// and its Authorizer.Lambda.
	Authorizer func(*http.Request) map[string]any
}

// DefaultUnavailableRetryAfter is how long a client is asked to wait after
// a fail-closed route could not be decided: about one circuit-breaker
// probe interval, short enough that a blip is not felt for long.
const DefaultUnavailableRetryAfter = time.Second

// Middleware returns net/http middleware that rate-limits every request
// through decide, which is called once per request and is expected to spend
// the request's cost (or, with ReportOnly, to peek). The middleware knows
// nothing of where requests come from: decide does (API Gateway events,
// a local server, anything).
//
// decide answers with the request's outcome, a value of the caller's own
// type O whose HTTPOutcome has its Kind already set (KindOf, say), or with
// an error when the request could not be decided. An error comes with an
// outcome of Kind Unavailable or Undecidable; with any other Kind (none,
// say: the decide function failed before it had an outcome) the error
// alone says which, as KindOf reads it. Limit is the ready-made
// decide function for one limit per key.
//
// The answer follows the Kind:
//
//   - Blocked: 403 with contract.ForbiddenBody, no rate-limit headers; the
//     handler is not called.
//   - Unavailable (a fail-closed route Redis could not decide): 503 with
//     Retry-After and contract.ServiceUnavailableBody; the handler is not
//     called.
//   - Undecidable: 500 with a JSON body of code INTERNAL_ERROR; the error
//     is logged, never sent to the client.
//   - an outcome with no decisions of any other Kind (Unlimited, or no
//     limit applies): the handler is called, no headers added.
//   - Denied, or Degraded and denied: 429 with the rate-limit headers of
//     the closest decision (SetHeaders; RateLimit-Policy is the
//     outcome's Policy when set), Retry-After and
//     contract.TooManyRequestsBody; the handler is not called. With ReportOnly
//     the handler is called instead, with the headers but no Retry-After,
//     unless the outcome is QuotaDenied: that is a 429 with or without
//     ReportOnly.
//   - UnauthorizedOverLimit: the same 429, with or without ReportOnly.
//   - Unauthorized: 401 with a JSON body of code UNAUTHORIZED, and the
//     rate-limit headers when it holds a decision (none for a bad
//     credential from an unlimited network); the handler is not called.
//   - otherwise the handler is called with the rate-limit headers already
//     set on the response, and the outcome in the request's context
//     (OutcomeFromContext).
//
// Every answer above that carries the rate-limit headers also carries
// contract.HeaderDegraded: true when the local fallback decided it (Redis
// unavailable on a fail-open route, Result.Degraded).
//
// Every JSON body is written with Content-Type: application/json and
// Cache-Control: no-store, as API Gateway's own gateway responses are: a
// 429, 503, 401 or 500 is about one moment and one caller, and no cache
// may serve it to another.
func Middleware[O Answerer](decide func(*http.Request) (O, error), opts Options) func(http.Handler) http.Handler {
	unavailableRetry := opts.UnavailableRetryAfter
	if unavailableRetry <= 0 {
		unavailableRetry = DefaultUnavailableRetryAfter
	}
	unavailableSeconds := RetryAfterSeconds(unavailableRetry)
	logger := opts.Logger
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			decided, err := decide(r)
			out := decided.HTTPOutcome()
			kind := out.Kind
			if err != nil && kind != Unavailable && kind != Undecidable {
				// decide failed before it had an outcome: the error
				// alone says which kind.
				kind = KindOf(Decided{Err: err})
			}
			switch kind {
			case Blocked:
				writeJSON(w, http.StatusForbidden, contract.ForbiddenBody())
				return
			case Unavailable:
				logFailure(logger, opts.RouteName, r, "rate limit undecided on a fail-closed route", err)
				w.Header().Set(headerRetryAfter, strconv.FormatInt(unavailableSeconds, 10))
				writeJSON(w, http.StatusServiceUnavailable, contract.ServiceUnavailableBody(unavailableSeconds))
				return
			case Undecidable:
				logFailure(logger, opts.RouteName, r, "rate limit decision failed", err)
				writeJSON(w, http.StatusInternalServerError, contract.InternalErrorBody())
				return
			case UnauthorizedOverLimit:
				setHeaders(w, out)
				tooManyRequests(w, out)
				return
			case Unauthorized:
				// With no decisions (a credential that does not verify
				// where no limit applies: an unlimited network), refused
				// all the same, without rate-limit headers.
				setHeaders(w, out)
				w.Header().Del(headerRetryAfter)
				writeJSON(w, http.StatusUnauthorized, contract.UnauthorizedBody())
				return
			}
			if len(out.Result.Decisions) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			setHeaders(w, out)
			if !out.Result.Allowed && (!opts.ReportOnly || out.QuotaDenied) {
				tooManyRequests(w, out)
				return
			}
			// Retry-After means nothing on a response that lets the request
			// through (RFC 9110, section 10.2.3).
			w.Header().Del(headerRetryAfter)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), outcomeKey{}, decided)))
		})
	}
}

// setHeaders sets the rate-limit headers of out, when it holds a
// decision: those of the closest decision, RateLimit-Policy out's Policy
// when set, and contract.HeaderDegraded when the local fallback decided.
func setHeaders(w http.ResponseWriter, out Outcome) {
	if len(out.Result.Decisions) == 0 {
		return
	}
	SetHeaders(w.Header(), out.Result)
	if out.Policy != "" {
		w.Header().Set(headerRateLimitPolicy, out.Policy)
	}
	if out.Result.Degraded {
		w.Header().Set(contract.HeaderDegraded, "true")
	}
}

// tooManyRequests answers 429 with Retry-After: the closest decision's
// wait, which Closest picks as the denial with the longest wait.
func tooManyRequests(w http.ResponseWriter, out Outcome) {
	retry := RetryAfterSeconds(out.Result.RetryAfter())
	w.Header().Set(headerRetryAfter, strconv.FormatInt(retry, 10))
	writeJSON(w, http.StatusTooManyRequests, contract.TooManyRequestsBody(retry))
}

// OutcomeFromContext returns the outcome (of the decide function's type O)
// the Middleware reached for the request whose context ctx is, for
// handlers that report it (a quota endpoint, say). ok is false outside
// the middleware, and for another type than the decide function's.
func OutcomeFromContext[O any](ctx context.Context) (out O, ok bool) {
	out, ok = ctx.Value(outcomeKey{}).(O)
	return out, ok
}

type outcomeKey struct{}

// maxLoggedError bounds the error text of a failure line: a decide
// function's error may quote what a caller sent.
const maxLoggedError = 512

// errNoCause stands in the log for the error of an undecided outcome that
// decide returned without one.
var errNoCause = errors.New("decide gave no error for an undecided outcome")

// logFailure logs a request that could not be decided, named by
// routeName when set; otherwise the path is clipped, since a caller chooses
// it. The error is clipped too.
func logFailure(logger *slog.Logger, routeName func(*http.Request) string, r *http.Request, msg string, err error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err == nil {
		err = errNoCause
	}
	if routeName != nil {
		logger.LogAttrs(r.Context(), slog.LevelError, msg,
			slog.String("route", clipText(routeName(r), 16+1+256)),
			slog.String("error", clipText(err.Error(), maxLoggedError)))
		return
	}
	logger.LogAttrs(r.Context(), slog.LevelError, msg,
		slog.String("method", clipText(r.Method, 16)),
		slog.String("path", clipText(r.URL.Path, 256)),
		slog.String("error", clipText(err.Error(), maxLoggedError)))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contract.ContentTypeJSON)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client has gone; nothing left to tell it
}

// clipText is s cut to at most n bytes, then "..." when it was longer.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
