package policy_test

import (
	"testing"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/policy"
)

// FuzzStrictestReading draws configurations, methods, path spellings and
// source addresses, and checks that the rules under every reading are
// never looser than under the one reading the serving router uses (the
// API function's ServeMux reading of the path; the address as parsed):
// its limits are a superset, its cost at least as high, it fails closed
// whenever that reading does, it shadows no limit that reading enforces,
// and its network verdict exempts no more.
func FuzzStrictestReading(f *testing.F) {
	f.Add("GET /v1/items=20/1m,POST /auth/*=5/1m:sliding-log", "GET /v1/search=1,GET /v1/items=10", "/auth/*", "", "", "GET", "/v1/items?/../search", "203.0.113.7")
	f.Add("GET /v1/items=10/1m:fixed-window,GET /v1/items=10/1m:fixed-window", "", "none", "GET /v1/items", "", "GET", "/v1/%2e%2e/v1/items", "198.51.100.1")
	f.Add("ANY /auth/**=5/1m", "ANY /**=2,POST /auth/*=3", "/auth/**", "anonymous", "203.0.113.0/24=blocked,2002::/16=unlimited", "POST", "/x/../auth%2Flogin#frag", "2002:cb00:7107::1")
	f.Add("GET /a/*=3/1m", "GET /a/*=3", "/a/*", "", "10.0.0.0/8=unlimited,2002:a00::/24=partner", "HEAD", "//a//b/", "2002:a01:203::9")
	f.Add("none", "GET /b=4,GET /b/**=2", "/b", "user", "::/0=unlimited,0.0.0.0/0=partner", "GET", "/b?x/../..", "::ffff:10.1.2.3")
	f.Fuzz(func(t *testing.T, routes, costs, failClosed, shadow, networks, method, path, ip string) {
		cfg, _ := config.FromEnv(func(k string) string {
			return map[string]string{
				"RATE_LIMIT_ANONYMOUS": "100/1m", "RATE_LIMIT_USER": "100/1m", "RATE_LIMIT_ORG": "100/1m",
				"RATE_LIMIT_PLANS":  "partner=100/1m,1000/1h",
				"RATE_LIMIT_ROUTES": routes, "RATE_LIMIT_COSTS": costs, "RATE_LIMIT_FAIL_CLOSED": failClosed,
				"RATE_LIMIT_SHADOW": shadow, "RATE_LIMIT_NETWORKS": networks,
			}[k]
		})
		s := policy.StageOf(cfg, config.NewStageCache(cfg, nil).For(nil))
		caller := identity.Caller{Tier: identity.TierAnonymous, Identity: "ip:x"}
		all := policy.Request{Method: method, Path: policy.ParsePath(path), SourceIP: ip}
		served := all
		served.Path = all.Path.Served()
		strict, one := s.Resolve(all, caller), s.Resolve(served, caller)
		if strict.Cost < one.Cost {
			t.Fatalf("cost %d under every reading, %d under the served one", strict.Cost, one.Cost)
		}
		if one.FailClosed && !strict.FailClosed {
			t.Fatal("the served reading fails closed, every reading does not")
		}
		for _, l := range one.Limits {
			found := false
			for _, m := range strict.Limits {
				if m.Limit == l.Limit {
					found = true
					if m.Shadow && !l.Shadow {
						t.Fatalf("limit %s enforced under the served reading, shadow under every reading", l.Limit.Name)
					}
				}
			}
			if !found {
				t.Fatalf("limit %s applies under the served reading only", l.Limit.Name)
			}
		}
		keys := map[string]bool{}
		for _, l := range strict.Limits {
			k := l.Limit.Name + "|" + l.Limit.String() + "|" + string(l.Limit.Algorithm)
			if keys[k] {
				t.Fatalf("limit %s twice: two checks on one key", l.Limit.Name)
			}
			keys[k] = true
		}
		// The address as parsed, alone, against every form.
		a, ok := identity.ParseSource(ip)
		if !ok {
			return
		}
		onlyAddr, _ := s.Networks.LookupAddr(a)
		switch got := policy.NetworkOf(s.Networks, ip); {
		case onlyAddr == config.NetworkBlocked && got != config.NetworkBlocked:
			t.Fatalf("%s: blocked as parsed, %q in every form", ip, got)
		case got != "" && got != config.NetworkBlocked && got != onlyAddr:
			t.Fatalf("%s: %q in every form, %q as parsed: an exemption the address does not have", ip, got, onlyAddr)
		}
	})
}
