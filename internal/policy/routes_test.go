package policy_test

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestRouteMethods: the method is compared upper case; a GET limit holds
// HEAD (ServeMux answers HEAD with the GET handler); a HEAD limit holds
// HEAD only.
func TestRouteMethods(t *testing.T) {
	routes, err := config.ParseRoutes("GET /search=10/1m,HEAD /ping=1/1m,POST /auth/*=5/1m,ANY /all=1/1m", "")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		method, path string
		want         string
	}{
		{"GET", "/search", "GET /search"},
		{"HEAD", "/search", "GET /search"},
		{"head", "/search", "GET /search"},
		{"POST", "/search", ""},
		{"HEAD", "/ping", "HEAD /ping"},
		{"GET", "/ping", ""},
		{"post", "/%61uth/login", "POST /auth/*"},
		{"pOsT", "/auth/login", "POST /auth/*"},
		{"HEAD", "/auth/login", ""},
		{"OPTIONS", "/all", "* /all"},
	}
	for _, tc := range cases {
		var got []string
		for _, r := range routesFor(routes, tc.method, tc.path) {
			got = append(got, r.Limits[0].Name)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%s %s: %v, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestRouteAlgorithms: an entry may name its algorithm; one that does not
// gets the environment's.
func TestRouteAlgorithms(t *testing.T) {
	routes, err := config.ParseRoutes("POST /auth/*=5/1m:sliding-log, GET /search=10/1m , GET /x=1/1s : token-bucket", ratelimit.FixedWindow)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		alg ratelimit.Algorithm
		own bool
	}{{ratelimit.SlidingLog, true}, {ratelimit.FixedWindow, false}, {ratelimit.TokenBucket, true}}
	for i, w := range want {
		if routes[i].Limits[0].Algorithm != w.alg || routes[i].Limits[0].OwnAlgorithm != w.own {
			t.Errorf("route %d (%s): algorithm %s own %v, want %s %v", i, routes[i].Limits[0].Name, routes[i].Limits[0].Algorithm, routes[i].Limits[0].OwnAlgorithm, w.alg, w.own)
		}
	}
	if routes[0].Limits[0].Name != "POST /auth/*" {
		t.Errorf("name %q: the algorithm is not part of the policy name", routes[0].Limits[0].Name)
	}
	for _, bad := range []string{
		"POST /auth/*=5/1m:",
		"POST /auth/*=5/1m:magic",
		"POST /auth/*=5/1m:Sliding-Log",
		"POST /auth/*=5/1m:sliding-log:x",
		"POST /auth/*=:sliding-log",
		"POST /auth/*=5:sliding-log",
	} {
		if _, err := config.ParseRoutes(bad, ""); err == nil {
			t.Errorf("ParseRoutes(%q) accepted", bad)
		}
	}
}

// TestTierAndStageAlgorithms: a tier may name its algorithm, in the
// environment and in stage variables; an explicit algorithm wins over
// RATE_LIMIT_ALGORITHM and rateLimitAlgorithm.
func TestTierAndStageAlgorithms(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_ANONYMOUS": "30/1m:sliding-log",
		"RATE_LIMIT_ALGORITHM": "fixed-window",
		"RATE_LIMIT_ROUTES":    "POST /auth/*=5/1m:sliding-log,GET /search=10/1m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tiers.Anonymous[0].Algorithm != ratelimit.SlidingLog || !cfg.Tiers.Anonymous[0].OwnAlgorithm {
		t.Errorf("anonymous: %s, want sliding-log of its own", cfg.Tiers.Anonymous[0].Algorithm)
	}
	if cfg.Tiers.User[0].Algorithm != ratelimit.FixedWindow || cfg.Tiers.User[0].OwnAlgorithm {
		t.Errorf("user: %s, want the environment's fixed-window", cfg.Tiers.User[0].Algorithm)
	}
	cache := config.NewStageCache(cfg, nil)
	l := cache.For(map[string]string{"rateLimitAlgorithm": "token-bucket", "rateLimitOrg": "50/1m:sliding-buckets"})
	checks := []struct {
		name string
		got  ratelimit.Algorithm
		want ratelimit.Algorithm
	}{
		{"anonymous (own in the environment)", l.Tiers.Anonymous[0].Algorithm, ratelimit.SlidingLog},
		{"user (the stage's)", l.Tiers.User[0].Algorithm, ratelimit.TokenBucket},
		{"org (own in the stage variable)", l.Tiers.Org[0].Algorithm, ratelimit.SlidingBuckets},
		{"login route (own)", l.Routes[0].Limits[0].Algorithm, ratelimit.SlidingLog},
		{"search route (the stage's)", l.Routes[1].Limits[0].Algorithm, ratelimit.TokenBucket},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
	if l.Tiers.Org.String() != "50/1m" {
		t.Errorf("org: %s", l.Tiers.Org)
	}
	// A stage value that names an unknown algorithm is reported and the
	// environment's limit used.
	var reported []error
	cache = config.NewStageCache(cfg, func(err error) { reported = append(reported, err) })
	if l := cache.For(map[string]string{"rateLimitUser": "5/1m:magic"}); l.Tiers.User.String() != "600/1m" || len(reported) != 1 {
		t.Errorf("bad stage algorithm: user %s, reported %v", l.Tiers.User, reported)
	}
	// A bad tier value in the environment falls back to the default.
	if cfg, err := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_USER": "5/1m:"})); err == nil || cfg.Tiers.User.String() != "600/1m" || cfg.Tiers.User[0].OwnAlgorithm {
		t.Errorf("RATE_LIMIT_USER=5/1m: accepted (%v)", err)
	}
}

// routesFor is the route limits that hold a request, as the runtime's
// checks pick them: method upper case, path as received.
func routesFor(routes []config.RouteLimit, method, path string) []config.RouteLimit {
	p := route.ParsePath(path)
	var out []config.RouteLimit
	for _, r := range routes {
		if route.MethodMatches(r.Method, strings.ToUpper(method)) && p.Matches(r.Path) {
			out = append(out, r)
		}
	}
	return out
}
