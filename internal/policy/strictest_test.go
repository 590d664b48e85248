package policy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/route"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// FuzzStrictestReading draws configurations (plans stricter and looser
// than the tier, in-flight limits, shadow lists, networks), methods, path
// spellings and source addresses, and checks that the rules under every
// reading are never looser than under the one reading the serving router
// uses (the API function's ServeMux reading of the path; the address as
// parsed): its limits and in-flight limits are a superset, its cost at
// least as high, it fails closed whenever that reading does, it shadows no
// limit that reading enforces, and its network verdict exempts no more.
// Each form of the address is a reading too (issue 37): the rules hold
// every limit each form's network would enforce alone (its plan's, or the
// tier's), and the tier's whenever the forms disagree; in-flight limits
// belong only to an owner whose rate limits are in force.
func FuzzStrictestReading(f *testing.F) {
	const plans, conc = "partner=100/1m,1000/1h;scrapers=3/1h", "anonymous=4,partner=50,scrapers=1,GET /v1/slow=2"
	f.Add("GET /v1/items=20/1m,POST /auth/*=5/1m:sliding-log", "GET /v1/search=1,GET /v1/items=10", "/auth/*", "", "", plans, conc, "GET", "/v1/items?/../search", "203.0.113.7")
	f.Add("GET /v1/items=10/1m:fixed-window,GET /v1/items=10/1m:fixed-window", "", "none", "GET /v1/items", "", plans, "", "GET", "/v1/%2e%2e/v1/items", "198.51.100.1")
	f.Add("ANY /auth/**=5/1m", "ANY /**=2,POST /auth/*=3", "/auth/**", "anonymous", "203.0.113.0/24=blocked,2002::/16=unlimited", plans, conc, "POST", "/x/../auth%2Flogin#frag", "2002:cb00:7107::1")
	f.Add("GET /a/*=3/1m", "GET /a/*=3", "/a/*", "", "10.0.0.0/8=unlimited,2002:a00::/24=partner", plans, conc, "HEAD", "//a//b/", "2002:a01:203::9")
	f.Add("none", "GET /b=4,GET /b/**=2", "/b", "user", "::/0=unlimited,0.0.0.0/0=partner", plans, conc, "GET", "/b?x/../..", "::ffff:10.1.2.3")
	// Issue 37: a stricter plan's network reached through 6to4; two plans
	// that disagree; a plan wholly in shadow with an in-flight entry.
	f.Add("none", "", "", "", "203.0.113.0/24=scrapers", plans, conc, "GET", "/v1/slow", "2002:cb00:7107::1")
	f.Add("none", "", "", "partner", "203.0.113.0/24=scrapers,2002::/16=partner", plans, conc, "GET", "/v1/slow", "2002:cb00:7107::1")
	f.Add("none", "", "", "scrapers", "0.0.0.0/0=scrapers", plans, conc, "GET", "/v1/slow", "198.51.100.1")
	f.Fuzz(func(t *testing.T, routes, costs, failClosed, shadow, networks, plans, concurrency, method, path, ip string) {
		cfg, _ := config.FromEnv(func(k string) string {
			return map[string]string{
				"RATE_LIMIT_ANONYMOUS": "100/1m", "RATE_LIMIT_USER": "100/1m", "RATE_LIMIT_ORG": "100/1m",
				"RATE_LIMIT_PLANS": plans, "RATE_LIMIT_CONCURRENCY": concurrency,
				"RATE_LIMIT_ROUTES": routes, "RATE_LIMIT_COSTS": costs, "RATE_LIMIT_FAIL_CLOSED": failClosed,
				"RATE_LIMIT_SHADOW": shadow, "RATE_LIMIT_NETWORKS": networks,
			}[k]
		})
		s := policy.Stage{Limits: config.NewStageCache(cfg, nil).For(nil)}
		caller := identity.Caller{Tier: identity.TierAnonymous, Identity: "ip:x"}
		all := policy.Request{Method: method, Path: route.ParsePath(path), SourceIP: ip}
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
		holdsInFlight(t, one.InFlight, strict.InFlight, "the served reading")
		ownersInForce(t, s, strict)
		// The address as parsed, alone, against every form.
		a, ok := identity.ParseSource(ip)
		if !ok {
			return
		}
		onlyAddr, _ := s.Limits.Networks.LookupAddr(a)
		got := network.Read(s.Limits.Networks, nil, ip).String()
		switch {
		case onlyAddr == network.Blocked && got != network.Blocked:
			t.Fatalf("%s: blocked as parsed, %q in every form", ip, got)
		case got != "" && got != network.Blocked && got != onlyAddr:
			t.Fatalf("%s: %q in every form, %q as parsed: an exemption the address does not have", ip, got, onlyAddr)
		}
		if got == network.Blocked || got == network.Unlimited {
			return
		}
		// Every form is a reading: what its network would hold the
		// caller by alone (its plan as the caller's, or the tier), with
		// the tier's own reading whenever the forms disagree.
		forms, _ := identity.SourceForms(ip)
		readings := map[string]bool{}
		for _, f := range forms {
			if plan, _ := s.Limits.Networks.LookupAddr(f); plan != network.Unlimited {
				readings[plan] = true
			}
		}
		if got == "" {
			readings[""] = true
		}
		for plan := range readings {
			alone := s.Resolve(served, identity.Caller{Tier: identity.TierAnonymous, Identity: "ip:x", Plan: plan})
			for _, l := range alone.Limits {
				if l.Shadow {
					continue
				}
				if !slices.ContainsFunc(strict.Limits, func(m config.OwnedLimit) bool { return m.Limit == l.Limit && !m.Shadow }) {
					t.Fatalf("%s: limit %s enforced under the reading of plan %q, not under every reading (network %q)", ip, l.Limit.Name, plan, got)
				}
			}
			holdsInFlight(t, alone.InFlight, strict.InFlight, "the reading of plan "+strconv.Quote(plan))
		}
	})
}

// holdsInFlight fails t unless every in-flight limit of one is in every.
func holdsInFlight(t *testing.T, one, every []ratelimit.ConcurrencyLimit, what string) {
	t.Helper()
	for _, l := range one {
		if !slices.Contains(every, l) {
			t.Fatalf("in-flight limit %s=%d under %s only (every reading: %v)", l.Name, l.Max, what, every)
		}
	}
}

// ownersInForce fails t when an in-flight limit belongs to a plan none of
// whose rate limits is in force (a plan wholly in shadow leaves its
// callers held as they were), or when the tier's rate limits are in force
// and its configured in-flight entry is not.
func ownersInForce(t *testing.T, s policy.Stage, r policy.Rules) {
	t.Helper()
	if r.Network.Verdict != httplimit.NetworkLimits {
		return
	}
	enforced := map[string]bool{}
	for _, l := range r.Limits {
		if !l.Shadow {
			enforced[l.Owner] = true
		}
	}
	tierEntry := false
	for _, l := range r.InFlight {
		switch {
		case l.Name == r.Tier:
			tierEntry = true
		case strings.Contains(l.Name, " "): // a route's
		case !enforced[l.Name]:
			t.Fatalf("in-flight limit of %s, none of whose rate limits is in force (limits %+v)", l.Name, r.Limits)
		}
	}
	if _, ok := s.Limits.Concurrency.Owners[r.Tier]; ok && enforced[r.Tier] && !tierEntry {
		t.Fatalf("the tier %s holds the caller, its in-flight limit does not (in-flight %v)", r.Tier, r.InFlight)
	}
}
