package policy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/route"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// stageOf is the policy of cfg on a stage with stageVars.
func stageOf(cfg *config.Config, stageVars map[string]string) policy.Stage {
	return policy.Stage{Limits: config.NewStageCache(cfg, nil).For(stageVars)}
}

// forRequest resolves a request of a caller of tier and plan from no
// network.
func forRequest(s policy.Stage, tier, plan, method, path string) policy.Rules {
	return s.Resolve(policy.Request{Method: method, Path: route.ParsePath(path)}, identity.Caller{Tier: tier, Identity: "key:abc", Plan: plan})
}

// TestCosts (from internal/config): a request costs its highest matching
// entry's units (GET also holds HEAD).
func TestCosts(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_PLANS":  "pro=25/1m",
		"RATE_LIMIT_COSTS":  "POST /v1/reports=10,GET /v1/export/*=5,ANY /v1/**=2",
		"RATE_LIMIT_ROUTES": "none",
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		want         int64
	}{
		{"POST", "/v1/reports", 10},
		{"GET", "/v1/reports", 2},
		{"HEAD", "/v1/export/a/b", 5},
		{"GET", "/v2/x", 1},
	} {
		if got := forRequest(stageOf(cfg, nil), identity.TierUser, "", c.method, c.path).Cost; got != c.want {
			t.Errorf("%s %s costs %d, want %d", c.method, c.path, got, c.want)
		}
	}

}

// TestShadowFlags (from internal/config TestShadow): each limit's shadow
// flag, by its owner's name or its own.
func TestShadowFlags(t *testing.T) {
	env := map[string]string{
		"RATE_LIMIT_PLANS":  "pro=10/1s,100/1m",
		"RATE_LIMIT_ROUTES": "POST /auth/*=5/1m",
		"RATE_LIMIT_SHADOW": "user, pro-1m, post /auth/*",
	}
	cfg, err := config.FromEnv(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	req := forRequest(stageOf(cfg, nil), identity.TierOrg, "pro", "POST", "/auth/login")
	var got []string
	for _, l := range req.Limits {
		got = append(got, l.Limit.Name+"="+map[bool]string{true: "shadow", false: "enforced"}[l.Shadow])
	}
	if want := "pro-1s=enforced pro-1m=shadow POST /auth/*=shadow"; strings.Join(got, " ") != want {
		t.Errorf("limits %s, want %s", strings.Join(got, " "), want)
	}
	// The stage variable replaces the list on its stage.
	req = forRequest(stageOf(cfg, map[string]string{"rateLimitShadow": "pro"}), identity.TierOrg, "pro", "GET", "/x")
	// (issue 20, hole 5: the org tier's limit is now enforced beneath the
	// plan in shadow; the plan's two limits stay first, both shadow.)
	if len(req.Limits) != 3 || !req.Limits[0].Shadow || !req.Limits[1].Shadow || req.Limits[2].Shadow || req.Limits[2].Limit.Name != "org" {
		t.Errorf("stage shadow: %+v", req.Limits)
	}
}

// TestForRequest (from internal/config): a configured plan replaces the
// tier's limits; an unknown
// plan gets the tier's and is reported as unknown; the cost comes along.
func TestForRequest(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_PLANS": "pro=2/1s,5/1m", "RATE_LIMIT_COSTS": "POST /r=2", "RATE_LIMIT_ROUTES": "none",
	}))
	if err != nil {
		t.Fatal(err)
	}
	l := stageOf(cfg, nil)
	pro := forRequest(l, identity.TierOrg, "pro", "POST", "/r")
	if pro.Plan != "pro" || pro.UnknownPlan != "" || pro.Cost != 2 || len(pro.Limits) != 2 || pro.Limits[0].Limit.Name != "pro-1s" {
		t.Errorf("pro: %+v", pro)
	}
	unknown := forRequest(l, identity.TierUser, "gold", "GET", "/r")
	if unknown.Plan != "" || unknown.UnknownPlan != "gold" || unknown.Cost != 1 || len(unknown.Limits) != 1 || unknown.Limits[0].Limit.Name != "user" {
		t.Errorf("unknown plan: %+v", unknown)
	}
	checks := pro.Checks("key:abc")
	if shadowed := forRequest(l, identity.TierUser, "", "GET", "/r"); shadowed.Limits[0].Shadow {
		t.Errorf("nothing is shadowed, yet %+v", shadowed.Limits[0])
	}
	if len(checks) != 2 || checks[1].Identity != "key:abc" || checks[1].Limit.Name != "pro-1m" {
		t.Errorf("checks %+v", checks)
	}
}

// FuzzPlanRules (from internal/config FuzzPlans): every configured plan
// resolves to its own limits at a cost of at least 1.
func FuzzPlanRules(f *testing.F) {
	f.Add("free=20/1s,600/1m;pro=100/1s,6000/1m,10000/1d", "POST /v1/reports=10,GET /v1/export/*=5", "pro-1d,user,POST /v1/reports")
	f.Add("a=1/1m,b=2/1m,,;;=", "ANY /**=1", "")
	f.Add("x=1/1m:leaky-bucket", "POST /=2", "x")
	f.Fuzz(func(t *testing.T, plans, costs, shadow string) {
		cfg, _ := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_PLANS": plans, "RATE_LIMIT_COSTS": costs, "RATE_LIMIT_SHADOW": shadow}))
		l := stageOf(cfg, nil)
		for name := range cfg.Plans {
			r := forRequest(l, identity.TierUser, name, "POST", "/v1/reports")
			if r.Cost < 1 || len(r.Limits) == 0 || r.Plan != name {
				t.Fatalf("plan %s: request limits %+v", name, r)
			}
		}
	})
}

// TestInFlightLimits: a caller's in-flight limits (RATE_LIMIT_CONCURRENCY)
// are its plan's entry, its tier's when the plan has none, then every
// route entry a reading matches; a blocked or unlimited network's caller
// has none.
func TestInFlightLimits(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_CONCURRENCY": "anonymous=2,org=50,pro=20,GET /v1/slow=1",
		"RATE_LIMIT_PLANS":       "pro=100/1m;free=10/1m",
		"RATE_LIMIT_NETWORKS":    "10.0.0.0/8=unlimited,192.0.2.0/24=blocked",
	}))
	if err != nil {
		t.Fatal(err)
	}
	s := stageOf(cfg, nil)
	for _, tc := range []struct {
		name, tier, plan, method, path, ip string
		want                               string
	}{
		{"tier", "anonymous", "", "GET", "/v1/items", "", "anonymous=2"},
		{"plan with an entry", "org", "pro", "GET", "/v1/items", "", "pro=20"},
		{"plan without one keeps its tier's", "org", "free", "GET", "/v1/items", "", "org=50"},
		{"tier without an entry", "user", "", "GET", "/v1/items", "", ""},
		{"route beside the tier", "anonymous", "", "GET", "/v1/slow", "", "anonymous=2,GET /v1/slow=1"},
		{"HEAD is held by GET", "user", "", "HEAD", "/v1/slow", "", "GET /v1/slow=1"},
		{"another method", "user", "", "POST", "/v1/slow", "", ""},
		{"a reading that resolves to the route", "user", "", "GET", "/v1/items/../slow", "", "GET /v1/slow=1"},
		{"unlimited network", "anonymous", "", "GET", "/v1/slow", "10.1.2.3", ""},
		{"blocked network", "anonymous", "", "GET", "/v1/slow", "192.0.2.7", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := policy.Request{Method: tc.method, Path: route.ParsePath(tc.path), SourceIP: tc.ip}
			rules := s.Resolve(req, identity.Caller{Tier: tc.tier, Identity: "key:abc", Plan: tc.plan})
			var got []string
			for _, l := range rules.InFlight {
				got = append(got, l.Name+"="+strconv.FormatInt(l.Max, 10))
			}
			if strings.Join(got, ",") != tc.want {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
}

// TestInFlightFollowsTheOwner (issue 37, hole 1): in-flight limits follow
// the owner of the enforced rate limits. A plan wholly in shadow leaves
// its callers held by their tier's in-flight entry, as before the plan was
// tried, never by the plan's (looser or stricter); a plan partly in shadow
// still owns them.
func TestInFlightFollowsTheOwner(t *testing.T) {
	cfg := mustEnv(t, map[string]string{
		"RATE_LIMIT_CONCURRENCY": "org=1,pro=3,trial=5",
		"RATE_LIMIT_PLANS":       "pro=100/1m;trial=10/1s,100/1m;quiet=5/1m",
		"RATE_LIMIT_SHADOW":      "pro,trial-1s,quiet",
	})
	s := stageOf(cfg, nil)
	for _, tc := range []struct{ name, plan, want string }{
		{"a plan wholly in shadow: the tier's entry", "pro", "org=1"},
		{"a plan partly in shadow owns its entry", "trial", "trial=5"},
		{"a plan wholly in shadow with no entry: the tier's", "quiet", "org=1"},
		{"no plan: the tier's", "", "org=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := s.Resolve(policy.Request{Method: "GET", Path: route.ParsePath("/v1/slow")}, identity.Caller{Tier: identity.TierOrg, Identity: "key:abc", Plan: tc.plan})
			var got []string
			for _, l := range rules.InFlight {
				got = append(got, l.Name+"="+strconv.FormatInt(l.Max, 10))
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("in-flight %v, want %s", got, tc.want)
			}
			every := s.EveryInFlight(rules.CallerRules)
			if len(every) != len(rules.InFlight) || (len(every) > 0 && every[0] != rules.InFlight[0]) {
				t.Errorf("inspect's in-flight %v, the request's %v", every, rules.InFlight)
			}
		})
	}
}
