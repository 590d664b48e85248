package config_test

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestLimitLists: a tier, plan or route takes a list of limits; a list of
// one keeps its owner's name, a longer one names each limit owner-window;
// each limit keeps its own algorithm.
func TestLimitLists(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_USER":   "20/1s,600/1m:sliding-log, 10000/1d",
		"RATE_LIMIT_ROUTES": "POST /auth/*=5/1m:sliding-log,100/1d,GET /search=100/1m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range cfg.Tiers.User {
		got = append(got, l.Name+"="+config.LimitList{l}.String()+":"+string(l.Algorithm))
	}
	want := "user-1s=20/1s:sliding-window user-1m=600/1m:sliding-log user-1d=10000/1d:sliding-window"
	if strings.Join(got, " ") != want {
		t.Errorf("user tier: %s, want %s", strings.Join(got, " "), want)
	}
	if cfg.Tiers.Anonymous[0].Name != "anonymous" || len(cfg.Tiers.Anonymous) != 1 {
		t.Errorf("anonymous tier: %+v", cfg.Tiers.Anonymous)
	}
	if len(cfg.Routes) != 2 || cfg.Routes[0].Limits.String() != "5/1m,100/1d" || cfg.Routes[0].Limits[1].Name != "POST /auth/*-1d" ||
		cfg.Routes[1].Name() != "GET /search" || cfg.Routes[1].Limits[0].Name != "GET /search" {
		t.Errorf("routes: %+v", cfg.Routes)
	}

	bad := []struct{ name, spec string }{
		{"same window twice", "1/1m,2/60s"},
		{"empty item", "1/1m,,2/1h"},
		{"too many", "1/1ms,1/2ms,1/3ms,1/4ms,1/5ms,1/6ms,1/7ms,1/8ms,1/9ms"},
		{"bad algorithm", "1/1m:magic"},
		{"too large to compute", "1000000/30d"},
		{"not days", "1/1.5d"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			if l, err := config.ParseLimitList("pro", b.spec, ""); err == nil {
				t.Errorf("ParseLimitList(%q) = %v, want an error", b.spec, l)
			}
		})
	}
}

// TestParsePlans: entries are separated by ';' or ','; an item without
// '=' continues the list before it; names are case-insensitive; a bad
// entry is reported and only that plan left out.
func TestParsePlans(t *testing.T) {
	tests := []struct {
		name, spec string
		want       map[string]string
		wantErr    string
	}{
		{"semicolons", "free=20/1s,600/1m;pro=100/1s,6000/1m,10000/1d", map[string]string{"free": "20/1s,600/1m", "pro": "100/1s,6000/1m,10000/1d"}, ""},
		{"commas only", "free=20/1s,600/1m,pro=100/1s", map[string]string{"free": "20/1s,600/1m", "pro": "100/1s"}, ""},
		{"case and spaces", " Free = 5/1m ; PRO_2=7/1m ", map[string]string{"free": "5/1m", "pro_2": "7/1m"}, ""},
		{"none", "none", map[string]string{}, ""},
		{"bad limit leaves the plan out", "free=5/1m;pro=100/1s,lots", map[string]string{"free": "5/1m"}, `plan "pro"`},
		{"bad name", "free=5/1m;pro-x=1/1s", map[string]string{"free": "5/1m"}, "pro-x"},
		{"reserved name", "unlimited=5/1m", map[string]string{}, "reserved"},
		{"a tier's name", "user=5/1m;pro=1/1s", map[string]string{"pro": "1/1s"}, "tier"},
		{"twice", "free=5/1m;FREE=6/1m", map[string]string{"free": "5/1m"}, "twice"},
		{"no name", "5/1m", map[string]string{}, "want name="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plans, err := config.ParsePlans(tt.spec, "")
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
			got := map[string]string{}
			for name, list := range plans {
				got[name] = list.String()
			}
			if len(got) != len(tt.want) {
				t.Fatalf("plans %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("plan %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// TestPlanStageVariables: rateLimitPlan<Name> (or rateLimitPlan_<name>)
// replaces a plan's limits on a stage, or adds a plan; a bad value keeps
// the environment's; two variables for one plan are reported.
func TestPlanStageVariables(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_PLANS": "free=5/1m;pro=50/1m"}))
	if err != nil {
		t.Fatal(err)
	}
	var reported []error
	cache := config.NewStageCache(cfg, func(err error) { reported = append(reported, err) })
	l := cache.For(map[string]string{"rateLimitPlanPro": "10/1s,100/1m", "rateLimitPlan_gold": "1000/1m", "rateLimitPlanFree": "nope"})
	got := map[string]string{}
	for name, list := range l.Plans {
		got[name] = list.String()
	}
	if got["pro"] != "10/1s,100/1m" || got["gold"] != "1000/1m" || got["free"] != "5/1m" || len(got) != 3 {
		t.Errorf("stage plans %v", got)
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "rateLimitPlanFree") {
		t.Errorf("reported %v, want one error naming rateLimitPlanFree", reported)
	}
	reported = nil
	if l := cache.For(map[string]string{"rateLimitPlanPro": "1/1s", "rateLimitPlan_pro": "2/1s"}); l.Plans["pro"].String() != "1/1s" || len(reported) != 1 {
		t.Errorf("two variables for pro: %s, reported %v", l.Plans["pro"], reported)
	}
	if env := cache.For(nil); env.Plans["pro"].String() != "50/1m" {
		t.Errorf("environment changed: %v", env.Plans["pro"])
	}
}

// TestCosts: a cost above a limit it is spent on is refused at start,
// and the whole RATE_LIMIT_COSTS with it.
func TestCosts(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_PLANS":  "pro=25/1m",
		"RATE_LIMIT_COSTS":  "POST /v1/reports=10,GET /v1/export/*=5,ANY /v1/**=2",
		"RATE_LIMIT_ROUTES": "none",
	}))
	if err != nil {
		t.Fatal(err)
	}
	_ = cfg // what each request costs: internal/policy TestCosts

	refused := []struct {
		name string
		env  map[string]string
		what string
	}{
		{"above a plan", map[string]string{"RATE_LIMIT_PLANS": "free=5/1m", "RATE_LIMIT_COSTS": "POST /r=10"}, "free"},
		{"above a tier", map[string]string{"RATE_LIMIT_ANONYMOUS": "3/1m", "RATE_LIMIT_COSTS": "POST /r=4"}, "anonymous"},
		{"leaky bucket admits one at once", map[string]string{"RATE_LIMIT_ALGORITHM": "leaky-bucket", "RATE_LIMIT_COSTS": "POST /r=2"}, "leaky-bucket"},
		{"above an overlapping route limit", map[string]string{"RATE_LIMIT_ROUTES": "ANY /r/*=3/1m", "RATE_LIMIT_COSTS": "POST /r/x=4"}, "* /r/*"},
		{"not a number", map[string]string{"RATE_LIMIT_COSTS": "POST /r=ten"}, "POST /r=ten"},
		{"no method", map[string]string{"RATE_LIMIT_COSTS": "/r=2"}, "/r=2"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.FromEnv(envOf(tt.env))
			if err == nil || !strings.Contains(err.Error(), "RATE_LIMIT_COSTS") || !strings.Contains(err.Error(), tt.what) {
				t.Errorf("error %v, want one naming RATE_LIMIT_COSTS and %q", err, tt.what)
			}
			if cfg.Costs != nil {
				t.Errorf("costs kept: %v", cfg.Costs)
			}
		})
	}
	// A route limit no costly request can match is not in the way.
	if _, err := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_ROUTES": "GET /r/*=3/1m,POST /s=1/1m", "RATE_LIMIT_COSTS": "POST /r/x=4"})); err != nil {
		t.Errorf("disjoint route limit refused the cost: %v", err)
	}
	// A stage that lowers a limit under a cost keeps the environment's.
	var reported []error
	cache := config.NewStageCache(cfg, func(err error) { reported = append(reported, err) })
	if l := cache.For(map[string]string{"rateLimitPlan_pro": "5/1m"}); l.Plans["pro"].String() != "25/1m" || len(reported) != 1 {
		t.Errorf("stage under a cost: pro %s, reported %v", l.Plans["pro"], reported)
	}
}

// TestShadow: names are tiers, plans, routes and single limits; a name
// that shadows nothing rejects the whole value (everything enforced).
func TestShadow(t *testing.T) {
	env := map[string]string{
		"RATE_LIMIT_PLANS":  "pro=10/1s,100/1m",
		"RATE_LIMIT_ROUTES": "POST /auth/*=5/1m",
		"RATE_LIMIT_SHADOW": "user, pro-1m, any /nothing/** ,post /auth/*",
	}
	if _, err := config.FromEnv(envOf(env)); err == nil || !strings.Contains(err.Error(), "* /nothing/**") {
		t.Errorf("a route with no limit was accepted: %v", err)
	}
	env["RATE_LIMIT_SHADOW"] = "user, pro-1m, post /auth/*"
	cfg, err := config.FromEnv(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Shadow.Names(), "|"); got != "POST /auth/*|pro-1m|user" {
		t.Errorf("shadow names %q", got)
	}
	// A route on a stage, where values have no spaces: METHOD:/glob.
	if s, err := config.ParseShadow("post:/v1/reports,pro"); err != nil || strings.Join(s.Names(), "|") != "POST /v1/reports|pro" {
		t.Errorf("ParseShadow with a colon: %v, %v", s.Names(), err)
	}
}

// TestNetworks: a bad entry of RATE_LIMIT_NETWORKS fails the whole
// value, naming the variable (network.Parse names the entry).
func TestNetworks(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33=blocked", "10.0.0.0/8", "10.0.0.0/8=no-such!", "fe80::1%eth0=blocked", "10.0.0.0/8=blocked,10.0.0.0/8=unlimited", "banana=blocked"} {
		cfg, err := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_NETWORKS": bad}))
		if err == nil || !strings.Contains(err.Error(), "RATE_LIMIT_NETWORKS") || cfg.Networks.Len() != 0 {
			t.Errorf("RATE_LIMIT_NETWORKS=%q: error %v, %d networks kept", bad, err, cfg.Networks.Len())
		}
	}
}

// TestKeyPlansAndClaim: API_KEY_HASHES entries may carry ":plan";
// JWT_PLAN_CLAIM may be a namespaced claim URL.
func TestKeyPlansAndClaim(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("B", 64)
	cfg, err := config.FromEnv(envOf(map[string]string{
		"API_KEY_HASHES": a + ":Pro," + b + ",  " + strings.Repeat("c", 64) + ":bad plan",
		"JWT_PLAN_CLAIM": "https://example.com/plan",
	}))
	if err == nil || !strings.Contains(err.Error(), "cccccccc") || strings.Contains(err.Error(), strings.Repeat("c", 64)) {
		t.Errorf("bad plan error %v: want the hash's start only", err)
	}
	if len(cfg.APIKeyHashes) != 3 || cfg.APIKeyPlans[a] != "pro" || cfg.APIKeyPlans[strings.ToLower(b)] != "" || len(cfg.APIKeyPlans) != 1 {
		t.Errorf("hashes %v, plans %v", cfg.APIKeyHashes, cfg.APIKeyPlans)
	}
	if cfg.JWTPlanClaim != "https://example.com/plan" {
		t.Errorf("plan claim %q", cfg.JWTPlanClaim)
	}
	if cfg, err := config.FromEnv(envOf(map[string]string{"JWT_PLAN_CLAIM": "a b"})); err == nil || cfg.JWTPlanClaim != "" {
		t.Errorf("JWT_PLAN_CLAIM with a space accepted")
	}
}

// FuzzPlans: parsing plans, costs and shadow lists never panics, and what
// is accepted is usable: valid limits with distinct names, costs every
// limit can pay.
func FuzzPlans(f *testing.F) {
	f.Add("free=20/1s,600/1m;pro=100/1s,6000/1m,10000/1d", "POST /v1/reports=10,GET /v1/export/*=5", "pro-1d,user,POST /v1/reports")
	f.Add("a=1/1m,b=2/1m,,;;=", "ANY /**=1", "")
	f.Add("x=1/1m:leaky-bucket", "POST /=2", "x")
	f.Add(";free=,", "GET /a=0", "none")
	f.Add("p=5/1m,5/1m", "GET a=1", "p-1m, GET /a")
	f.Add("P=1/1ms:token-bucket,1/1d:sliding-log", "POST /x/*/y=1000000", "p-1ms")
	f.Fuzz(func(t *testing.T, plans, costs, shadow string) {
		p, _ := config.ParsePlans(plans, ratelimit.SlidingWindow)
		for name, list := range p {
			seen := map[string]bool{}
			for _, l := range list {
				if err := l.Validate(); err != nil {
					t.Fatalf("ParsePlans(%q): plan %s has an invalid limit: %v", plans, name, err)
				}
				if seen[l.Name] {
					t.Fatalf("ParsePlans(%q): plan %s has two limits named %s", plans, name, l.Name)
				}
				seen[l.Name] = true
			}
		}
		cfg, _ := config.FromEnv(envOf(map[string]string{"RATE_LIMIT_PLANS": plans, "RATE_LIMIT_COSTS": costs, "RATE_LIMIT_SHADOW": shadow}))
		for _, c := range cfg.Costs {
			for _, list := range cfg.Plans {
				for _, lim := range list {
					if c.Cost > lim.Burst() {
						t.Fatalf("cost %s accepted above %s", c, lim.Name)
					}
				}
			}
		}
		_, _ = config.ParseShadow(shadow)
	})
}

// TestDailyQuotaLimits: a daily quota of 100,000 or 1,000,000 is a limit
// for the sliding window (the default) and the fixed window, in the
// environment and on a stage; an algorithm that cannot enforce it refuses
// it with an error naming that algorithm, and a stage algorithm that cannot
// enforce an environment limit is reported and the environment's used.
func TestDailyQuotaLimits(t *testing.T) {
	for _, spec := range []string{"20/1s,600/1m,100000/1d", "20/1s,600/1m,1000000/1d", "100000/1d:fixed-window", "1000000/1d:fixed-window"} {
		l, err := config.ParseLimitList("pro", spec, "")
		if err != nil || l.String() != strings.Split(spec, ":")[0] {
			t.Errorf("ParseLimitList(%q) = %v, %v", spec, l, err)
		}
	}
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.LeakyBucket, ratelimit.SlidingLog, ratelimit.SlidingBuckets} {
		_, err := config.ParseLimitList("pro", "20/1s,100000/1d", alg)
		if err == nil || !strings.Contains(err.Error(), string(alg)) {
			t.Errorf("100000/1d as %s: %v, want an error naming the algorithm", alg, err)
		}
	}
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_PLANS": "free=10/1s,300/1m,5000/1d;pro=50/1s,3000/1m,100000/1d;enterprise=1000000/1d",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Plans["pro"].String(); got != "50/1s,3000/1m,100000/1d" {
		t.Errorf("pro: %s", got)
	}
	if got := cfg.Plans["enterprise"].String(); got != "1000000/1d" {
		t.Errorf("enterprise: %s", got)
	}
	if _, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_ALGORITHM": "token-bucket",
		"RATE_LIMIT_PLANS":     "pro=50/1s,100000/1d",
	})); err == nil || !strings.Contains(err.Error(), "token-bucket") {
		t.Errorf("100000/1d under RATE_LIMIT_ALGORITHM=token-bucket: %v, want an error naming token-bucket", err)
	}

	var reported []error
	cache := config.NewStageCache(cfg, func(err error) { reported = append(reported, err) })
	l := cache.For(map[string]string{"rateLimitAlgorithm": "token-bucket"})
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "rateLimitAlgorithm") || !strings.Contains(reported[0].Error(), "token-bucket") {
		t.Errorf("a stage algorithm that cannot enforce 100000/1d: reported %v", reported)
	}
	for name, list := range l.Plans {
		for _, x := range list {
			if err := x.Validate(); err != nil || x.Algorithm != ratelimit.SlidingWindow {
				t.Errorf("plan %s on the stage: %s %s (%v), want the environment's sliding-window", name, x.Algorithm, x.Limit, err)
			}
		}
	}
	reported = nil
	l = cache.For(map[string]string{"rateLimitAlgorithm": "fixed-window", "rateLimitPlanPro": "50/1s,1000000/1d"})
	if len(reported) != 0 || l.Plans["pro"].String() != "50/1s,1000000/1d" || l.Plans["pro"][1].Algorithm != ratelimit.FixedWindow || l.Plans["enterprise"][0].Algorithm != ratelimit.FixedWindow {
		t.Errorf("fixed-window stage with a daily quota: plans %v, reported %v", l.Plans, reported)
	}
}
