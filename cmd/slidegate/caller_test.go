package main

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/identity"
)

func TestCallerFlags(t *testing.T) {
	logged := identity.Hash("ip:203.0.113.7")
	cases := []struct {
		name     string
		flags    callerFlags
		prefix   int
		tier, id string
		err      string
	}{
		{"ipv4", callerFlags{ip: "203.0.113.7"}, 64, "anonymous", "ip:203.0.113.7", ""},
		{"ipv6 per prefix", callerFlags{ip: "2001:db8:1:2:3:4:5:6"}, 48, "anonymous", "ip:2001:db8:1::/48", ""},
		{"api key", callerFlags{apiKey: "k"}, 64, "org", "key:" + identity.KeyHash("k"), ""},
		{"api key hash, upper case", callerFlags{apiKeyHash: strings.ToUpper(identity.KeyHash("k"))}, 64, "org", "key:" + identity.KeyHash("k"), ""},
		{"subject", callerFlags{sub: "alice"}, 64, "user", "sub:alice", ""},
		{"none", callerFlags{}, 64, "", "", "exactly one"},
		{"two", callerFlags{ip: "203.0.113.7", sub: "alice"}, 64, "", "", "exactly one"},
		{"bad address", callerFlags{ip: "203.0.113"}, 64, "", "", "not an IP address"},
		{"bad hash", callerFlags{apiKeyHash: "xyz"}, 64, "", "", "64 hex digits"},
		// --identity takes the identity as the logs print it (issue 41).
		{"logged hash", callerFlags{id: logged}, 64, "", "hash:" + logged, ""},
		{"logged hash and its tier", callerFlags{id: strings.ToUpper(logged), tier: "org"}, 64, "org", "hash:" + logged, ""},
		{"hash: and the hash", callerFlags{id: "hash:" + logged, tier: "anonymous"}, 64, "anonymous", "hash:" + logged, ""},
		{"an identity as counted", callerFlags{id: "ip:2001:db8:1:2::5"}, 64, "anonymous", "ip:2001:db8:1:2::/64", ""},
		{"a key identity", callerFlags{id: "key:" + identity.KeyHash("k")}, 64, "org", "key:" + identity.KeyHash("k"), ""},
		{"a tier that is not the kind's", callerFlags{id: "sub:alice", tier: "org"}, 64, "", "", "tier user"},
		{"an unknown tier", callerFlags{id: logged, tier: "gold"}, 64, "", "", "anonymous, user or org"},
		{"a tier without --identity", callerFlags{ip: "203.0.113.7", tier: "anonymous"}, 64, "", "", "goes with --identity"},
		{"a hash one digit short", callerFlags{id: logged[:31]}, 64, "", "", "--identity"},
		{"identity and ip", callerFlags{id: logged, ip: "203.0.113.7"}, 64, "", "", "exactly one"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.flags.caller(c.prefix)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got.Tier != c.tier || got.Identity != c.id {
				t.Fatalf("got %+v, %v; want %s %s", got, err, c.tier, c.id)
			}
		})
	}
}

// FuzzCallerFlags: any caller flags give a caller of a known kind or an
// error, never a panic.
func FuzzCallerFlags(f *testing.F) {
	f.Add("203.0.113.7", "", "", "", 64)
	f.Add("::ffff:203.0.113.7", "", "", "", 128)
	f.Add("", "", strings.Repeat("a", 64), "", 64)
	f.Add("", "", "", "sub\x00", 0)
	f.Fuzz(func(t *testing.T, ip, key, hash, sub string, prefix int) {
		c, err := callerFlags{ip: ip, apiKey: key, apiKeyHash: hash, sub: sub}.caller(prefix)
		if err != nil {
			return
		}
		for _, kind := range []string{identity.KindIP, identity.KindKey, identity.KindSubject} {
			if strings.HasPrefix(c.Identity, kind) {
				return
			}
		}
		t.Fatalf("identity %q of no known kind", c.Identity)
	})
}

func TestStageVarFlag(t *testing.T) {
	s := stageVarFlag{}
	for _, bad := range []string{"novalue", "=x", " =x"} {
		if err := s.Set(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if err := s.Set(" rateLimitUser =5/1m=x"); err != nil || s["rateLimitUser"] != "5/1m=x" {
		t.Errorf("got %v, %v", s, err)
	}
}

// TestCallerPlan: --plan names the plan; without it an API_KEY_HASHES key
// brings its own; a name that is no plan name is refused.
func TestCallerPlan(t *testing.T) {
	keyPlans := map[string]string{identity.KeyHash("pro-key"): "pro"}
	cases := []struct {
		name  string
		flags callerFlags
		want  string
		err   bool
	}{
		{"key with a plan", callerFlags{apiKey: "pro-key"}, "pro", false},
		{"key without one", callerFlags{apiKey: "other"}, "", false},
		{"--plan wins", callerFlags{apiKey: "pro-key", plan: "Free"}, "free", false},
		{"subject with --plan", callerFlags{sub: "alice", plan: "pro"}, "pro", false},
		{"subject without", callerFlags{sub: "alice"}, "", false},
		{"bad plan", callerFlags{sub: "alice", plan: "pro plan"}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			caller, err := c.flags.caller(64)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.flags.planOf(caller, keyPlans)
			if got != c.want || (err != nil) != c.err {
				t.Errorf("plan %q, %v; want %q, error %v", got, err, c.want, c.err)
			}
		})
	}
}
