package policy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/route"
)

// TestStrictestRules pins the rule of every reading down, case by case
// (issue 20's holes as Stage.Resolve answers them).
func TestStrictestRules(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_ANONYMOUS": "100/1m", "RATE_LIMIT_ORG": "20/1m",
		"RATE_LIMIT_PLANS":    "enterprise=10/1s,12/1m;partner=50/1m",
		"RATE_LIMIT_SHADOW":   "enterprise",
		"RATE_LIMIT_ROUTES":   "GET /v1/items=20/1m",
		"RATE_LIMIT_COSTS":    "GET /v1/search=1,GET /v1/items=10",
		"RATE_LIMIT_NETWORKS": "203.0.113.0/24=blocked,198.51.100.0/24=partner,2002::/16=unlimited",
	}))
	if err != nil {
		t.Fatal(err)
	}
	s := stageOf(cfg, nil)
	anon := identity.Caller{Tier: identity.TierAnonymous, Identity: "ip:x"}

	// Hole 1: the dearest reading's cost, whatever the entries' order.
	r := s.Resolve(policy.Request{Method: "GET", Path: route.ParsePath("/v1/items?/../search")}, anon)
	if r.Cost != 10 || len(r.Limits) != 2 || r.Limits[1].Limit.Name != "GET /v1/items" {
		t.Errorf("/v1/items?/../search: cost %d, limits %+v; want 10 and the items route", r.Cost, r.Limits)
	}

	// Hole 4: a 6to4 address is also its IPv4 address: blocked if either
	// form is, exempt or on a plan only if both are.
	for _, c := range []struct{ ip, want string }{
		{"2002:cb00:7107::1", network.Blocked},  // 203.0.113.7: blocked
		{"2002:c633:6407::1", ""},               // 198.51.100.7 partner, 2002::/16 unlimited: they disagree
		{"198.51.100.7", "partner"},             // one form
		{"2002:c000:0201::1", ""},               // 192.0.2.1 under nothing: not unlimited
		{"::ffff:203.0.113.9", network.Blocked}, // mapped is IPv4
	} {
		if got := network.Read(s.Limits.Networks, nil, c.ip).String(); got != c.want {
			t.Errorf("network.Read(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
	if id, _ := identity.SourceIdentity("2002:cb00:7107:9::1", 64); id != "ip:203.0.113.7" {
		t.Errorf("6to4 identity %s, want ip:203.0.113.7", id)
	}

	// Hole 5: a plan wholly in shadow keeps the tier enforced beneath it.
	c := s.CallerRules(identity.Caller{Tier: identity.TierOrg, Plan: "enterprise"}, "")
	var got []string
	for _, l := range c.Own {
		got = append(got, l.Limit.Name+"="+map[bool]string{true: "shadow", false: "enforced"}[l.Shadow])
	}
	if want := "enterprise-1s=shadow enterprise-1m=shadow org=enforced"; strings.Join(got, " ") != want || c.Plan != "enterprise" {
		t.Errorf("plan in shadow: %s (plan %q), want %s", strings.Join(got, " "), c.Plan, want)
	}
	// A network's plan is its anonymous callers' plan, a caller's own plan
	// wins over it.
	if c := s.CallerRules(anon, "198.51.100.9"); c.Plan != "partner" || c.Network.Plan != "partner" {
		t.Errorf("anonymous caller on a partner network: %+v", c)
	}
	if c := s.CallerRules(identity.Caller{Tier: identity.TierOrg, Plan: "enterprise"}, "198.51.100.9"); c.Plan != "enterprise" {
		t.Errorf("caller with its own plan on a partner network: %+v", c)
	}
}

// TestWarnings: what loosens a limit without being wrong, each once.
func TestWarnings(t *testing.T) {
	cfg, err := config.FromEnv(envOf(map[string]string{
		"RATE_LIMIT_PLANS":    "pro=100/1m",
		"RATE_LIMIT_SHADOW":   "user,pro",
		"RATE_LIMIT_COSTS":    "GET /v1/*=1,GET /v1/items=5,POST /v1/items=5",
		"RATE_LIMIT_NETWORKS": "10.0.0.0/7=unlimited,10.9.0.0/16=pro,2001::/31=pro,192.0.0.0/2=blocked",
	}))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(policy.Warnings(stageOf(cfg, nil)), "\n")
	for _, want := range []string{
		"network 10.0.0.0/7=unlimited is shorter than /8",
		"network 2001::/31=pro is shorter than /32",
		"tier user is shadowed",
		"plan pro and tier user are both shadowed",
		"costs GET /v1/*=1 and GET /v1/items=5 overlap: a request matching both costs 5",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
	for _, never := range []string{"192.0.0.0/2", "10.9.0.0/16", "tier anonymous", "tier org", "POST /v1/items=5 overlap", "and POST /v1/items"} {
		if strings.Contains(got, never) {
			t.Errorf("warnings name %q:\n%s", never, got)
		}
	}
	if w := policy.Warnings(stageOf(mustEnv(t, nil), nil)); len(w) != 0 {
		t.Errorf("the default configuration warns: %v", w)
	}
}

func mustEnv(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.FromEnv(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDisagreeingFormsHoldEveryReading (issue 37, hole 2): when the forms
// of a source address (a 6to4 address and the IPv4 address it carries)
// disagree about a network's plan, a caller with no plan of its own is
// held by the limits of every reading together, the plan's and its
// tier's, rate and in-flight alike: a stricter plan cannot be escaped
// through the other form, a looser one is not gained. Only an exemption
// (unlimited) still needs every form to agree.
func TestDisagreeingFormsHoldEveryReading(t *testing.T) {
	cfg := mustEnv(t, map[string]string{
		"RATE_LIMIT_ANONYMOUS":   "30/1h",
		"RATE_LIMIT_PLANS":       "scrapers=3/1h;partner=1000/1h;trial=500/1h",
		"RATE_LIMIT_SHADOW":      "trial",
		"RATE_LIMIT_CONCURRENCY": "anonymous=4,scrapers=1,partner=50,trial=9",
		// 2002:cb00:7107::/48 is 203.0.113.7's, 2002:c633:6407::/48
		// 198.51.100.7's, 2002:c000:0207::/48 192.0.2.7's.
		"RATE_LIMIT_NETWORKS": "203.0.113.0/24=scrapers,198.51.100.0/24=partner,192.0.2.0/24=trial,2002:c633:6407::/48=unlimited,2002:c000::/32=scrapers",
	})
	s := stageOf(cfg, nil)
	anon := identity.Caller{Tier: identity.TierAnonymous, Identity: "ip:x"}
	for _, tc := range []struct{ name, ip, limits, inFlight string }{
		{"one form, a stricter plan", "203.0.113.7", "scrapers=enforced", "scrapers=1"},
		{"mapped is the IPv4 form", "::ffff:203.0.113.7", "scrapers=enforced", "scrapers=1"},
		{"6to4 of a stricter plan's network: the plan and the tier", "2002:cb00:7107::1", "scrapers=enforced anonymous=enforced", "scrapers=1,anonymous=4"},
		{"6to4 of a looser plan's network: the tier still holds", "2002:c633:6408::1", "partner=enforced anonymous=enforced", "partner=50,anonymous=4"},
		{"6to4 of a looser plan's network, the 6to4 form under an exemption: no exemption, both", "2002:c633:6407::1", "partner=enforced anonymous=enforced", "partner=50,anonymous=4"},
		{"two plans disagree: both and the tier", "2002:c000:0207::1", "scrapers=enforced trial=shadow anonymous=enforced", "scrapers=1,anonymous=4"},
		{"no network", "2001:db8::1", "anonymous=enforced", "anonymous=4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Resolve(policy.Request{Method: "GET", Path: route.ParsePath("/v1/items"), SourceIP: tc.ip}, anon)
			var limits, inFlight []string
			for _, l := range r.Limits {
				limits = append(limits, l.Limit.Name+"="+map[bool]string{true: "shadow", false: "enforced"}[l.Shadow])
			}
			for _, l := range r.InFlight {
				inFlight = append(inFlight, l.Name+"="+strconv.FormatInt(l.Max, 10))
			}
			if got := strings.Join(limits, " "); got != tc.limits {
				t.Errorf("limits %s, want %s", got, tc.limits)
			}
			if got := strings.Join(inFlight, ","); got != tc.inFlight {
				t.Errorf("in-flight %s, want %s", got, tc.inFlight)
			}
		})
	}
	// A caller's own plan still wins over its network's, as it does when
	// the forms agree.
	if c := s.CallerRules(identity.Caller{Tier: identity.TierOrg, Plan: "partner"}, "2002:cb00:7107::1"); c.Plan != "partner" || len(c.Own) != 1 {
		t.Errorf("a caller with its own plan: %+v", c)
	}
}
