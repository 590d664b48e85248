// Package apihandler is the API function's net/http handler: the example
// routes of slidegate's API behind the rate-limit middleware of
// pkg/httplimit, and the Lambda entry point that serves it for API
// Gateway REST (v1) and HTTP API (v2) proxy events through
// aws-lambda-go-api-proxy.
//
// The handler is an ordinary http.Handler, so a local server can serve it
// in-process. Behind API Gateway it reads the caller's source address,
// stage variables and the authorizer's context from the proxy event (which
// the proxy library keeps in the request's context), never from
// X-Forwarded-For.
//
// When the slidegate authorizer already decided the request (its context is
// in the event), that outcome is reused for the answer and its headers
// (apigw.FromAuthorizerContext) and nothing is counted twice. Without it (an HTTP API without the authorizer,
// a local server), the handler decides itself through the Runtime.
package apihandler

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"time"

	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/pkg/httplimit"
)

// Options configure the handler. The zero value is ready for use.
type Options struct {
	// Logger receives the handler's records (requests that could not be
	// decided), within the default observe.LogSampling budget: a caller can
	// cause them in a flood. slog.Default() when nil. The decisions' own
	// lines and metrics are the Runtime's.
	Logger *slog.Logger
	// UnavailableRetryAfter is the Retry-After of the 503 of a fail-closed
	// route Redis could not decide; httplimit.DefaultUnavailableRetryAfter
	// when zero.
	UnavailableRetryAfter time.Duration
}

// Routes of the example API.
const (
	RouteHealth = "GET /health"
	RouteQuota  = "GET /v1/quota"
	RouteItems  = "GET /v1/items"
	RouteSlow   = "GET /v1/slow"
	RouteLogin  = "POST /auth/login"
)

// New returns the API's handler:
//
//   - GET /health answers 200 and is not rate limited;
//   - GET /v1/quota answers the caller's limits without spending any of
//     them, even when they are exhausted; each call spends one from the
//     quota route's own limit per caller (RATE_LIMIT_QUOTA), and is
//     answered 429 with that limit's headers once it is spent
//     (instance.Resolution.Quota); an unknown API key or bad token is counted and
//     answered as on any route (apigw.Unauthorized, UnauthorizedOverLimit);
//   - GET /v1/items is an ordinary limited route;
//   - GET /v1/slow answers after ?ms= milliseconds (at most 10 s), the
//     example of a slow request that the in-flight limits are for;
//   - POST /auth/login is a demo login, limited by its route limit
//     (RATE_LIMIT_ROUTES) and failing closed (RATE_LIMIT_FAIL_CLOSED): a
//     503 when Redis cannot decide;
//   - anything else is counted like any request and answered 404.
//
// Every route but GET /health and GET /v1/quota runs holding its caller's
// in-flight slots (RATE_LIMIT_CONCURRENCY; instance.Resolution.Acquire and
// httplimit.Concurrency), taken after its rate limits admitted it, for
// the caller its rate decision resolved: each request is read once
// (readRequest) and resolved once (instance.Runtime.Resolve), and that
// resolution is carried in its context to every answer.
func New(rt *instance.Runtime, opts Options) http.Handler {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = slog.New(observe.SampledHandler(logger.Handler(), observe.LogSampling{}))
	d := deciders{rt: rt}
	limit := httplimit.Middleware(d.spend, httplimit.Options{
		Logger:                logger,
		RouteName:             routeName,
		UnavailableRetryAfter: opts.UnavailableRetryAfter,
	})
	report := httplimit.Middleware(d.peek, httplimit.Options{
		Logger:                logger,
		UnavailableRetryAfter: opts.UnavailableRetryAfter,
		ReportOnly:            true,
		RouteName:             routeName,
	})

	hold := httplimit.Concurrency(d.acquire, httplimit.Options{
		Logger:                logger,
		RouteName:             routeName,
		UnavailableRetryAfter: opts.UnavailableRetryAfter,
	})

	limited := http.NewServeMux()
	limited.HandleFunc(RouteItems, serveItems)
	limited.HandleFunc(RouteSlow, serveSlow)
	limited.HandleFunc(RouteLogin, serveLogin)
	limited.HandleFunc("/", serveNotFound)

	routes := http.NewServeMux()
	routes.HandleFunc(RouteHealth, serveHealth)
	routes.Handle(RouteQuota, report(http.HandlerFunc(serveQuota)))
	routes.Handle("/", limit(hold(limited)))
	return stripStage(d.read(cleanPathsOnly(routes, limit(http.HandlerFunc(serveNotFound)))))
}

// cleanPathsOnly sends requests for unclean paths ("//x", "/a/../b") to
// notFound instead of next: ServeMux would answer them with a redirect, an
// HTML body that no rate limit counts.
func cleanPathsOnly(next, notFound http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isCleanPath(r.URL.Path) {
			notFound.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isCleanPath reports whether ServeMux serves p as it is, without a
// redirect: an absolute path that path.Clean leaves alone, or one with a
// single trailing slash after a clean path other than the root ("//" is
// not "/" plus a trailing slash: ServeMux redirects it to "/").
func isCleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	clean := path.Clean(p)
	return p == clean || (clean != "/" && p == clean+"/")
}

// routeName names a request in the middleware's log lines as the decision
// lines name it (apigw.RouteName): an HTTP API's route key, never a path
// that may hold a secret, when the event has one.
func routeName(r *http.Request) string { return apigw.RouteName(carriedFrom(r).res.Request()) }

// deciders turn an HTTP request into the middleware's outcome.
type deciders struct {
	rt *instance.Runtime
}

// carried is what the handler knows of one request, read once and carried
// in its context (read, carriedFrom) to every answer.
type carried struct {
	// res is the request's resolution: its caller and rules, resolved on
	// the first answer that needs them, once.
	res *instance.Resolution
	// authorized is the slidegate authorizer's outcome for the request,
	// read back from its context (apigw.FromAuthorizerContext); nil when
	// no slidegate authorizer ran before the function.
	authorized *apigw.Outcome
}

type carriedKey struct{}

// read reads each request once (readRequest), with the authorizer's
// outcome when its context carries one, begins its resolution
// (instance.Runtime.Resolve), and serves it with both in its context. It
// goes inside stripStage: the path read is the one the routes match.
func (d deciders) read(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, authorizer := readRequest(r)
		c := &carried{res: d.rt.Resolve(r.Context(), req)}
		if out, ok := apigw.FromAuthorizerContext(authorizer); ok {
			c.authorized = &out
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), carriedKey{}, c)))
	})
}

// carriedFrom is what read carries for r; a request that did not pass
// through read is a programming error.
func carriedFrom(r *http.Request) *carried {
	c, ok := r.Context().Value(carriedKey{}).(*carried)
	if !ok {
		panic("apihandler: request served without its resolution (read)")
	}
	return c
}

// spend reuses the authorizer's outcome when the event carries one
// (read), and otherwise counts the request through
// its resolution. An authorizer that could not decide a fail-closed route
// is believed: 503, without asking Redis again.
func (d deciders) spend(r *http.Request) (apigw.Outcome, error) {
	c := carriedFrom(r)
	if out := c.authorized; out != nil {
		if out.Kind == apigw.Unavailable {
			return *out, httplimit.ErrAuthorizerUnavailable
		}
		// Counted by the authorizer: nothing is counted twice.
		return *out, nil
	}
	// The error is not wrapped again: the Runtime's error already names
	// the route (apigw.RouteName, clipped), and the middleware's line names
	// it once more. A caller chooses the path; each copy of it in a log
	// line is one more place for a token in it to land.
	return c.res.Decide(r.Context())
}

// peek reports the caller's limits without spending them: the
// authorizer's context holds only the closest limit, so the quota always
// asks Redis (unless an authorizer in front of it could not decide a
// fail-closed route). It spends one call from the quota route's own limit,
// whose denial is QuotaDenied (429 under ReportOnly). An unknown key or bad
// token is not a peek: instance.Resolution.Quota counts it, and the middleware
// answers it by its apigw.Kind.
func (d deciders) peek(r *http.Request) (apigw.Outcome, error) {
	c := carriedFrom(r)
	if out := c.authorized; out != nil && out.Kind == apigw.Unavailable {
		return *out, httplimit.ErrAuthorizerUnavailable
	}
	// Not wrapped again with the route: see spend.
	return c.res.Quota(r.Context())
}

// acquire takes the request's in-flight slots, whether its rate limits were
// decided here or by the authorizer: the authorizer never learns when a
// request ends, so the in-flight limits are the API function's alone.
func (d deciders) acquire(r *http.Request) (httplimit.Admission, error) {
	return carriedFrom(r).res.Acquire(r.Context())
}

// stripStage removes an HTTP API's named-stage prefix ("/prod") from the
// path (apigw.StripStage), so that routes match on every stage as they do
// for REST APIs. A REST proxy event's path already leaves the stage out.
func stripStage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		path := r.URL.EscapedPath()
		rest := apigw.StripStage(path, rc.Stage)
		decoded, err := url.PathUnescape(rest)
		if rest == path || err != nil {
			next.ServeHTTP(w, r)
			return
		}
		// A shallow copy, as http.StripPrefix makes: only the path differs.
		stripped := new(http.Request)
		*stripped = *r
		u := *r.URL
		u.Path, u.RawPath = decoded, ""
		stripped.URL = &u
		next.ServeHTTP(w, stripped)
	})
}

// readRequest reads what r tells slidegate, once: the apigw.Request of the
// event the proxy library put in r's context (a REST or an HTTP API proxy
// event; an HTTP request without one is a local server's), and the
// authorizer's context (requestContext.authorizer for REST,
// requestContext.authorizer.lambda for an HTTP API) when API Gateway ran
// the slidegate authorizer before the function, else nil.
func readRequest(r *http.Request) (req apigw.Request, authorizer map[string]any) {
	ctx := r.Context()
	if rc, ok := core.GetAPIGatewayContextFromContext(ctx); ok {
		vars, _ := core.GetStageVarsFromContext(ctx)
		return apigw.FromRESTProxy(r, rc, vars), rc.Authorizer
	}
	if rc, ok := core.GetAPIGatewayV2ContextFromContext(ctx); ok {
		vars, _ := core.GetStageVarsFromContextV2(ctx)
		if rc.Authorizer != nil {
			authorizer = rc.Authorizer.Lambda
		}
		return apigw.FromHTTPAPIProxy(r, rc, vars), authorizer
	}
	return apigw.FromHTTPRequest(r), nil
}
