package policy_test

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/policy"
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
	r := s.Resolve(policy.Request{Method: "GET", Path: policy.ParsePath("/v1/items?/../search")}, anon)
	if r.Cost != 10 || len(r.Limits) != 2 || r.Limits[1].Limit.Name != "GET /v1/items" {
		t.Errorf("/v1/items?/../search: cost %d, limits %+v; want 10 and the items route", r.Cost, r.Limits)
	}

	// Hole 4: a 6to4 address is also its IPv4 address: blocked if either
	// form is, exempt or on a plan only if both are.
	for _, c := range []struct{ ip, want string }{
		{"2002:cb00:7107::1", config.NetworkBlocked},  // 203.0.113.7: blocked
		{"2002:c633:6407::1", ""},                     // 198.51.100.7 partner, 2002::/16 unlimited: they disagree
		{"198.51.100.7", "partner"},                   // one form
		{"2002:c000:0201::1", ""},                     // 192.0.2.1 under nothing: not unlimited
		{"::ffff:203.0.113.9", config.NetworkBlocked}, // mapped is IPv4
	} {
		if got := policy.NetworkOf(s.Networks, c.ip); got != c.want {
			t.Errorf("NetworkOf(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
	if id, _ := identity.SourceIdentity("2002:cb00:7107:9::1", 64); id != "ip:203.0.113.7" {
		t.Errorf("6to4 identity %s, want ip:203.0.113.7", id)
	}

	// Hole 5: a plan wholly in shadow keeps the tier enforced beneath it.
	c := s.Caller(identity.Caller{Tier: identity.TierOrg, Plan: "enterprise"}, "")
	var got []string
	for _, l := range c.Own {
		got = append(got, l.Limit.Name+"="+map[bool]string{true: "shadow", false: "enforced"}[l.Shadow])
	}
	if want := "enterprise-1s=shadow enterprise-1m=shadow org=enforced"; strings.Join(got, " ") != want || c.Plan != "enterprise" {
		t.Errorf("plan in shadow: %s (plan %q), want %s", strings.Join(got, " "), c.Plan, want)
	}
	// A network's plan is its anonymous callers' plan, a caller's own plan
	// wins over it.
	if c := s.Caller(anon, "198.51.100.9"); c.Plan != "partner" || c.Network != "partner" {
		t.Errorf("anonymous caller on a partner network: %+v", c)
	}
	if c := s.Caller(identity.Caller{Tier: identity.TierOrg, Plan: "enterprise"}, "198.51.100.9"); c.Plan != "enterprise" {
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
