package httplimit

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/slidegate/slidegate/pkg/httplimit/contract"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Concurrency returns net/http middleware that holds the in-flight slots
// of every request while its handler runs: acquire is called once per
// request, before the handler, and the Admission's Release once the handler
// has returned (with a context that outlives the request's, so that a
// request whose client left still gives its slots back).
//
// The answers:
//
//   - a Denied admission: 429 with Retry-After (the Slot's RetryAfter, in
//     whole seconds, at least 1) and contract.TooManyInFlightBody; no
//     RateLimit headers are set for it (the rate-limit headers describe
//     rate limits only: the IETF draft has no field for requests in
//     flight) and the handler is not called;
//   - an error wrapping ratelimit.ErrUnavailable (a fail-closed route Redis
//     could not decide): 503 with Retry-After, as Middleware answers it;
//   - any other error: 500 with a JSON body of code INTERNAL_ERROR;
//   - otherwise the handler is called.
//
// It goes inside Middleware: a request over its rate limit never takes a
// slot, and rate-limit headers already set on the response stay on the
// 429.
func Concurrency(acquire func(*http.Request) (Admission, error), opts Options) func(http.Handler) http.Handler {
	unavailableRetry := opts.UnavailableRetryAfter
	if unavailableRetry <= 0 {
		unavailableRetry = DefaultUnavailableRetryAfter
	}
	unavailableSeconds := RetryAfterSeconds(unavailableRetry)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			adm, err := acquire(r)
			switch {
			case errors.Is(err, ratelimit.ErrUnavailable):
				logFailure(opts.Logger, opts.RouteName, r, "in-flight limit undecided on a fail-closed route", err)
				w.Header().Set(headerRetryAfter, strconv.FormatInt(unavailableSeconds, 10))
				writeJSON(w, http.StatusServiceUnavailable, contract.ServiceUnavailableBody(unavailableSeconds))
				return
			case err != nil:
				logFailure(opts.Logger, opts.RouteName, r, "in-flight limit failed", err)
				writeJSON(w, http.StatusInternalServerError, contract.InternalErrorBody())
				return
			case adm.Denied:
				retry := RetryAfterSeconds(adm.Slot.RetryAfter)
				w.Header().Set(headerRetryAfter, strconv.FormatInt(retry, 10))
				writeJSON(w, http.StatusTooManyRequests, contract.TooManyInFlightBody(retry))
				return
			}
			if adm.Release != nil {
				defer adm.Release(context.WithoutCancel(r.Context()))
			}
			next.ServeHTTP(w, r)
		})
	}
}
