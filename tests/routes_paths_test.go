package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// loginSpellings are ways to write POST /auth/login: percent-encoded
// letters, an encoded slash, dot segments (plain and encoded), repeated
// and trailing slashes, a decoded '?' or '#' (an HTTP API's rawPath holds
// them decoded), a bad escape, and the method in any case. served says
// whether the API function's router serves it with the login handler in
// every event shape; servedOnStage, on an HTTP API's named stage only
// (where the stage prefix is stripped from the decoded path, so "%2F"
// separates segments there).
var loginSpellings = []struct {
	method, path  string
	served        bool
	servedOnStage bool
}{
	{"POST", "/auth/login", true, true},
	{"post", "/auth/login", true, true},
	{"Post", "/%61uth/login", true, true},
	{"POST", "/%61%75%74%68/%6C%6F%67%69%6E", true, true},
	{"POST", "/auth/log%69n", true, true},
	{"POST", "/auth%2Flogin", false, true},
	{"POST", "/auth%2flogin", false, true},
	{"POST", "/auth/login%2F", false, false},
	{"POST", "/auth/login/", false, false},
	{"POST", "/auth/./login", false, false},
	{"POST", "/auth/%2e/login", false, false},
	{"POST", "/x/../auth/login", false, false},
	{"POST", "/x/%2E%2E/auth/login", false, false},
	{"POST", "//auth/login", false, false},
	{"POST", "/auth//login", false, false},
	{"POST", "/./auth/login", false, false},
	{"POST", "/auth/login?x=1", true, true},
	{"POST", "/auth/login#x", true, true},
	{"POST", "/auth/login%zz", false, false},
}

// loginShape is one way API Gateway hands a request to the authorizer and
// the function: a REST API under a greedy resource, or an HTTP API on a
// stage.
type loginShape struct {
	name     string
	resource string // REST resource; empty for an HTTP API
	stage    string // HTTP API stage
}

var loginShapes = []loginShape{
	{name: "REST /{proxy+}", resource: "/{proxy+}"},
	{name: "REST /auth/{proxy+}", resource: "/auth/{proxy+}"},
	// Not greedy, but the router still serves "/auth/login" behind it:
	// the resource matches no "/auth/*" glob, the path does.
	{name: "REST /{section}/{action}", resource: "/{section}/{action}"},
	{name: "HTTP API $default", stage: "$default"},
	{name: "HTTP API stage prod", stage: "prod"},
}

// authorizerEvent is a real-shaped authorizer event of method and path for
// shape, from ip.
func (s loginShape) authorizerEvent(t testing.TB, method, path, ip string) []byte {
	t.Helper()
	var ev any
	if s.resource != "" {
		ev = events.APIGatewayCustomAuthorizerRequestTypeRequest{
			Type:       "REQUEST",
			MethodArn:  "arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/prod/" + strings.ToUpper(method) + "/auth/login",
			Resource:   s.resource,
			Path:       path,
			HTTPMethod: method,
			Headers:    map[string]string{"Host": "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", "Content-Type": "application/json"},
			RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{
				Path: "/prod" + path, AccountID: "123456789012", Stage: "prod", RequestID: "test",
				ResourcePath: s.resource, HTTPMethod: method, APIID: "a1b2c3d4e5",
				Identity: events.APIGatewayCustomAuthorizerRequestTypeRequestIdentity{SourceIP: ip},
			},
		}
	} else {
		raw := path
		if s.stage != "$default" {
			raw = "/" + s.stage + path
		}
		v2 := events.APIGatewayV2CustomAuthorizerV2Request{
			Version: "2.0", Type: "REQUEST", RouteKey: "$default", RawPath: raw,
			RouteArn: "arn:aws:execute-api:us-east-1:123456789012:f9e8d7c6b5/" + s.stage + "/" + strings.ToUpper(method) + "/auth/login",
			Headers:  map[string]string{"host": "f9e8d7c6b5.execute-api.us-east-1.amazonaws.com", "content-type": "application/json"},
		}
		v2.RequestContext.AccountID = "123456789012"
		v2.RequestContext.APIID = "f9e8d7c6b5"
		v2.RequestContext.Stage = s.stage
		v2.RequestContext.HTTP.Method = method
		v2.RequestContext.HTTP.Path = raw
		v2.RequestContext.HTTP.SourceIP = ip
		ev = v2
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// proxyEvent is the API function's proxy event of the same request, with a
// valid login body.
func (s loginShape) proxyEvent(t testing.TB, method, path, ip string) []byte {
	t.Helper()
	const body = `{"username":"u","password":"p"}`
	if s.resource != "" {
		return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.HTTPMethod, e.Path, e.Resource, e.Body = method, path, s.resource, body
			e.PathParameters = nil
			e.RequestContext.Identity.SourceIP = ip
			e.RequestContext.HTTPMethod = method
		})
	}
	return apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
		raw := path
		if s.stage != "$default" {
			raw = "/" + s.stage + path
		}
		e.RawPath, e.Body, e.RawQueryString = raw, body, ""
		e.RequestContext.Stage = s.stage
		e.RequestContext.HTTP.Method = method
		e.RequestContext.HTTP.Path = raw
		e.RequestContext.HTTP.SourceIP = ip
		e.RequestContext.Authorizer = nil
	})
}

// unavailableIn reports whether an authorizer context says its fail-closed
// route could not be decided.
func unavailableIn(ctx map[string]any) bool {
	out, ok := apigw.FromAuthorizerContext(ctx)
	return ok && out.Kind == apigw.Unavailable
}

// azVerdict reads one authorizer answer of either shape: admitted, denied
// (over a limit), or unavailable (a fail-closed route Redis could not
// decide), and the policy name of the closest limit.
func azVerdict(t testing.TB, rie *lambdatest.RIE, s loginShape, event []byte) (verdict, name string) {
	t.Helper()
	if s.resource != "" {
		a := azInvoke(t, rie, event)
		switch {
		case a.err != nil && strings.Contains(a.err.Error(), "rate limiter unavailable"):
			return "unavailable", ""
		case a.allowed():
			return "admitted", fmt.Sprint(a.resp.Context["name"])
		case a.denied():
			return "denied", fmt.Sprint(a.resp.Context["name"])
		}
		t.Fatalf("REST authorizer answered %+v", a)
	}
	resp := azHTTPInvoke(t, rie, event)
	switch {
	case !resp.IsAuthorized:
		t.Fatalf("HTTP API authorizer did not authorize: %+v", resp)
	case unavailableIn(resp.Context):
		return "unavailable", ""
	case resp.Context[apigw.CtxRetryAfter] != nil:
		return "denied", fmt.Sprint(resp.Context[apigw.CtxName])
	}
	return "admitted", fmt.Sprint(resp.Context[apigw.CtxName])
}

// TestEncodedLoginPathsReachTheLoginHandler shows, on the API function's
// real router (in-process, real Redis, limits out of the way), which
// spellings of POST /auth/login it serves with the login handler: those
// are the ones the authorizer must count against the login limit.
func TestEncodedLoginPathsReachTheLoginHandler(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS": "10000/1m",
		"RATE_LIMIT_ROUTES":    "POST /auth/*=10000/1m",
	}))
	for _, shape := range loginShapes {
		for i, sp := range loginSpellings {
			want := sp.served || (sp.servedOnStage && shape.stage == "prod")
			resp := apitest.Invoke(t, api, shape.proxyEvent(t, sp.method, sp.path, fmt.Sprintf("198.18.0.%d", i+1)))
			got := resp.StatusCode == 200 && strings.Contains(resp.Body, "Login accepted")
			if got != want {
				t.Errorf("%s: %s %s: served by the login handler = %v, want %v (%d %s)", shape.name, sp.method, sp.path, got, want, resp.StatusCode, resp.Body)
			}
			if !got && resp.StatusCode != 404 && resp.StatusCode != 400 {
				t.Errorf("%s: %s %s: %d %s, want 404 or 400 when not served", shape.name, sp.method, sp.path, resp.StatusCode, resp.Body)
			}
		}
	}
}

// TestLoginLimitHoldsEverySpelling: under the emulator, with the default
// login limit (POST /auth/*=5/1m:sliding-log) and fail-closed glob, every
// spelling of the login path, in every event shape, is counted on the one
// login limit: exactly 5 admitted, the 6th denied whatever its spelling.
// With Redis down, every spelling fails closed (REST: the authorizer's
// error, a 503; HTTP API: unavailable in the context), never a degraded
// Allow.
func TestLoginLimitHoldsEverySpelling(t *testing.T) {
	srv := redistest.StartServer(t)
	// The HTTP API authorizer forwards denials (as the template's own API
	// does) so that the test reads which limit decided from the context.
	env := azEnv(srv.URL(), testkit.RandomSecret(t), map[string]string{"RATE_LIMIT_ANONYMOUS": "1000/1m", "HTTP_API_DENIALS": "forward"})
	delete(env, "RATE_LIMIT_ROUTES") // the default
	rie := azStart(t, env)

	ip := 0
	nextIP := func() string { ip++; return fmt.Sprintf("198.19.%d.%d", ip/250, ip%250+1) }
	for _, shape := range loginShapes {
		for _, sp := range loginSpellings {
			t.Run(shape.name+" "+sp.method+" "+sp.path, func(t *testing.T) {
				addr := nextIP()
				// Five in this spelling, then the plain spelling and this
				// one again: one counter.
				for i := range 5 {
					v, name := azVerdict(t, rie, shape, shape.authorizerEvent(t, sp.method, sp.path, addr))
					if v != "admitted" || name != "POST /auth/*" {
						t.Fatalf("attempt %d: %s by %q, want admitted by the login limit", i+1, v, name)
					}
				}
				for _, p := range []string{sp.path, "/auth/login"} {
					if v, name := azVerdict(t, rie, shape, shape.authorizerEvent(t, sp.method, p, addr)); v != "denied" || name != "POST /auth/*" {
						t.Errorf("6th attempt as %s: %s by %q, want denied by the login limit", p, v, name)
					}
				}
			})
		}
	}

	srv.Stop()
	for _, shape := range loginShapes {
		for _, sp := range loginSpellings {
			if v, _ := azVerdict(t, rie, shape, shape.authorizerEvent(t, sp.method, sp.path, nextIP())); v != "unavailable" {
				t.Errorf("Redis down: %s %s %s: %s, want unavailable (fail-closed)", shape.name, sp.method, sp.path, v)
			}
		}
	}
}

// TestParameterResourceLoginLimit: behind a REST resource with path
// parameters ("/{section}/{action}", no greedy "+"), the API function
// deciding alone (no authorizer in front) counts POST /auth/login on the
// login limit and fails it closed: the resource matches no "/auth/*"
// glob, the path the router serves does.
func TestParameterResourceLoginLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS": "1000/1m",
		"RATE_LIMIT_ROUTES":    "POST /auth/*=2/1m:sliding-log",
	}))
	login := func(path, ip string) apitest.Response {
		return apitest.Invoke(t, api, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.HTTPMethod, e.Path, e.Resource = "POST", path, "/{section}/{action}"
			e.Body = `{"username":"u","password":"p"}`
			e.PathParameters = map[string]string{"section": "auth", "action": "login"}
			e.RequestContext.Identity.SourceIP = ip
			e.RequestContext.HTTPMethod = "POST"
		}))
	}
	for i, p := range []string{"/auth/login", "/%61uth/login", "/auth/login"} {
		r := login(p, "198.18.2.1")
		if want := i < 2; (r.StatusCode == 200) != want {
			t.Fatalf("login %d as %s: %d %s, want admitted %v", i+1, p, r.StatusCode, r.Body, want)
		}
		if i == 2 && (r.StatusCode != 429 || !strings.Contains(r.Header.Get("RateLimit-Policy"), "POST /auth/*")) {
			t.Fatalf("login 3: %d, policy %q: want 429 by POST /auth/*", r.StatusCode, r.Header.Get("RateLimit-Policy"))
		}
	}
	srv.Stop()
	// Another caller: the first one's denial is remembered (deny cache).
	if r := login("/auth/login", "198.18.2.2"); r.StatusCode != 503 {
		t.Errorf("Redis down: %d %s, want 503 (the login route fails closed)", r.StatusCode, r.Body)
	}
}

// TestBasePathLoginLimit: behind a custom domain's base-path mapping
// ("/v2"), a REST request under a greedy resource carries the base path in
// its path ("/v2/auth/login") but not in its proxy parameter, which is
// what an HTTP proxy integration ("http://backend/{proxy}") serves. The
// authorizer counts it on the login limit (5 admitted, the 6th denied, by
// "POST /auth/*") and fails it closed with Redis down.
func TestBasePathLoginLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	env := azEnv(srv.URL(), testkit.RandomSecret(t), map[string]string{"RATE_LIMIT_ANONYMOUS": "1000/1m"})
	delete(env, "RATE_LIMIT_ROUTES") // the default
	rie := azStart(t, env)
	shape := loginShape{name: "REST /{proxy+} under /v2", resource: "/{proxy+}"}
	event := func(ip string) []byte {
		var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
		if err := json.Unmarshal(shape.authorizerEvent(t, "POST", "/v2/auth/login", ip), &ev); err != nil {
			t.Fatal(err)
		}
		ev.PathParameters = map[string]string{"proxy": "auth/login"}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i := range 6 {
		want := "admitted"
		if i == 5 {
			want = "denied"
		}
		if v, name := azVerdict(t, rie, shape, event("198.18.3.1")); v != want || name != "POST /auth/*" {
			t.Fatalf("attempt %d: %s by %q, want %s by the login limit", i+1, v, name, want)
		}
	}
	srv.Stop()
	if v, _ := azVerdict(t, rie, shape, event("198.18.3.2")); v != "unavailable" {
		t.Errorf("Redis down: %s, want unavailable (fail-closed)", v)
	}
}

// TestHeadCountsOnGetRouteLimit: Go's router answers HEAD with the GET
// handler, so a GET route limit holds HEAD too, in the API function and
// in the authorizer; a HEAD-only limit does not hold GET.
func TestHeadCountsOnGetRouteLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	routes := "GET /v1/items=3/1m,HEAD /health-check=1/1m"
	api := apitest.Start(t, apitest.Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": "1000/1m", "RATE_LIMIT_ROUTES": routes}))
	items := func(method string) apitest.Response {
		return apitest.Invoke(t, api, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.HTTPMethod, e.Path, e.Resource = method, "/v1/items", "/v1/items"
			e.RequestContext.Identity.SourceIP = "198.18.1.1"
		}))
	}
	for i, m := range []string{"HEAD", "head", "GET"} {
		if r := items(m); r.StatusCode != 200 {
			t.Fatalf("request %d (%s): %d, want 200", i+1, m, r.StatusCode)
		}
	}
	if r := items("HEAD"); r.StatusCode != 429 || !strings.Contains(r.Header.Get("RateLimit-Policy"), "GET /v1/items") {
		t.Errorf("4th request (HEAD): %d, policy %q: want 429 by the GET /v1/items limit", r.StatusCode, r.Header.Get("RateLimit-Policy"))
	}

	rie := azStart(t, azEnv(srv.URL(), testkit.RandomSecret(t), map[string]string{"RATE_LIMIT_ANONYMOUS": "1000/1m", "RATE_LIMIT_ROUTES": routes}))
	for i := range 4 {
		a := azInvoke(t, rie, azRESTEvent(t, azRequest{method: "HEAD", path: "/v1/items", ip: "198.18.1.2"}))
		if want := i < 3; a.allowed() != want || a.resp.Context["name"] != "GET /v1/items" {
			t.Errorf("authorizer HEAD %d: allowed %v by %v, want %v by GET /v1/items", i+1, a.allowed(), a.resp.Context["name"], want)
		}
	}
	for i := range 3 {
		a := azInvoke(t, rie, azRESTEvent(t, azRequest{method: "GET", path: "/health-check", ip: "198.18.1.3"}))
		if !a.allowed() || a.resp.Context["name"] != "anonymous" {
			t.Errorf("authorizer GET /health-check %d: allowed %v by %v, want allowed by the tier only", i+1, a.allowed(), a.resp.Context["name"])
		}
	}
}

// TestDefaultLoginLimitBoundaryAttack: an attacker sends 5 logins just
// before a minute boundary, then tries again every 500 ms for the next
// minute. The default login limit (exact sliding log) admits at most 5 in
// any rolling minute; the sliding-window counter the login limit used to
// inherit admits 9 (1.8x). The request's checks are the runtime's: the
// default anonymous tier (sliding window) and the default login route
// limit, two algorithms for one identity, decided together.
func TestDefaultLoginLimitBoundaryAttack(t *testing.T) {
	cfg, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			edge := time.Date(2026, 11, 29, 12, 1, 0, 0, time.UTC)
			clock := testkit.NewClock(edge.Add(-100 * time.Millisecond))
			limiter := newLimiter(t, topo.NewClient(t), ratelimit.Options{KeyPrefix: "login-edge", Now: clock.Now})
			var login []config.RouteLimit
			for _, r := range cfg.Routes {
				if route.MethodMatches(r.Method, "POST") && route.ParsePath("/auth/login").Matches(r.Path) {
					login = append(login, r)
				}
			}
			if len(login) != 1 {
				t.Fatalf("default routes for POST /auth/login: %v", login)
			}
			checks := []ratelimit.Check{
				{Identity: "attacker", Limit: cfg.Tiers.Anonymous[0].Limit},
				{Identity: "attacker", Limit: login[0].Limits[0].Limit},
			}
			var admitted []time.Time
			attempt := func() {
				res, err := limiter.Decide(context.Background(), 1, checks...)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed {
					admitted = append(admitted, clock.Now())
				}
			}
			for i := range 5 {
				clock.Set(edge.Add(time.Duration(i-5) * 10 * time.Millisecond))
				attempt()
			}
			for step := time.Duration(0); step < time.Minute; step += 500 * time.Millisecond {
				clock.Set(edge.Add(step))
				attempt()
			}
			peak := testkit.MaxInRollingWindow(admitted, time.Minute)
			t.Logf("admitted %d in %s; most in any rolling minute: %d", len(admitted), time.Minute+50*time.Millisecond, peak)
			if peak != 5 {
				t.Fatalf("the default login limit admitted %d in one rolling minute, want exactly 5", peak)
			}
		})
	}
}

// TestMixedAlgorithmsDenialSpendsNothing: a tier and a route limit of
// different algorithms for one identity are two script calls; a request
// either limit denies spends on neither.
func TestMixedAlgorithmsDenialSpendsNothing(t *testing.T) {
	srv := redistest.StartServer(t)
	limiter := newLimiter(t, srv.Client(t), ratelimit.Options{KeyPrefix: "mixed", Timeout: 10 * time.Second})
	tier := ratelimit.Limit{Name: "anonymous", Count: 3, Window: time.Minute, Algorithm: ratelimit.SlidingWindow}
	route := ratelimit.Limit{Name: "POST /auth/*", Count: 2, Window: time.Minute, Algorithm: ratelimit.SlidingLog}
	ctx := context.Background()
	for i := range 4 {
		res, err := limiter.Decide(ctx, 1, ratelimit.Check{Identity: "c", Limit: tier}, ratelimit.Check{Identity: "c", Limit: route})
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 2; res.Allowed != want {
			t.Fatalf("login %d: allowed %v, want %v", i+1, res.Allowed, want)
		}
	}
	// The two denied logins spent nothing on the tier: one unit is left.
	res, err := peekOn(limiter, ctx, 1, ratelimit.Check{Identity: "c", Limit: tier})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decisions[0].Remaining != 1 {
		t.Errorf("tier remaining %d after 2 admitted and 2 denied logins, want 1", res.Decisions[0].Remaining)
	}
}
