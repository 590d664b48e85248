package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// The holes of issue 20 ("the strictest reading"), each as the built
// authorizer under the Lambda emulator answers it, on a real Redis and a
// real cluster. The figures of docs/security.md are these counts.

// strictKey is an API key on plan enterprise, which the tests shadow.
const strictKey = "strictest-test-enterprise-key-0001"

// strictEnv is one configuration holding every hole's setting, each on
// its own paths.
func strictEnv(topo planTopology, secret string) map[string]string {
	return planEnv(topo, secret, map[string]string{
		"RATE_LIMIT_ANONYMOUS": "1000/1m",
		"RATE_LIMIT_USER":      "20/1m",
		"RATE_LIMIT_ORG":       "20/1m",
		// Hole 1: a cheap entry listed before a dear one.
		"RATE_LIMIT_COSTS": "GET /v1/search=1,GET /v1/items=10",
		// Hole 1: two items requests a minute (20 units at 10 each). Hole
		// 2: one limit listed twice, beside a limit of another algorithm
		// (the anonymous tier's sliding window). Hole 4: three a minute
		// per caller on /v4.
		"RATE_LIMIT_ROUTES": "POST /auth/*=5/1m:sliding-log,GET /v1/items=20/1m," +
			"GET /v2/items=10/1m:fixed-window,GET /v2/items=10/1m:fixed-window,GET /v4/*=3/1m",
		// Hole 4: a blocked IPv4 network.
		"RATE_LIMIT_NETWORKS": "203.0.113.0/24=blocked",
		// Hole 5: a whole plan in shadow.
		"RATE_LIMIT_PLANS":  "enterprise=10/1s,12/1m",
		"RATE_LIMIT_SHADOW": "enterprise",
		"API_KEY_HASHES":    identity.KeyHash(strictKey) + ":enterprise",
	})
}

func TestStrictestReadingThroughTheAuthorizer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	secret := testkit.RandomSecret(t)
	for _, topo := range planTopologies(t) {
		t.Run(topo.name, func(t *testing.T) {
			rie := azStart(t, strictEnv(topo, secret))
			rest := func(t *testing.T, n int, next func(i int) azRequest) (allowed int, last azAnswer) {
				t.Helper()
				for i := range n {
					last = azInvoke(t, rie, azRESTEvent(t, next(i)))
					switch {
					case last.allowed():
						allowed++
					case !last.denied():
						t.Fatalf("request %d: neither allowed nor denied: %+v", i+1, last)
					}
				}
				return allowed, last
			}

			// Hole 1: rawPath /v1/items?/../search is read as /v1/items
			// (cut at '?') and as /v1/search; the cost is the highest
			// either matches. Before: 20 of 25 admitted, charged 1 each.
			t.Run("hole 1: the cost of the dearest reading", func(t *testing.T) {
				for _, tc := range []struct {
					name, path, ip string
				}{
					{"plain path", "/v1/items", "198.51.100.11"},
					{"a spelling with a cheap reading", "/v1/items?/../search", "198.51.100.12"},
				} {
					allowed := 0
					for range 25 {
						if azHTTPInvoke(t, rie, azHTTPEvent(t, azRequest{path: tc.path, ip: tc.ip})).IsAuthorized {
							allowed++
						}
					}
					if allowed != 2 {
						t.Errorf("%s (%s): %d of 25 admitted, want 2 (20 units at 10 each)", tc.name, tc.path, allowed)
					}
				}
			})

			// Hole 2: the route listed twice is one limit, enforced beside
			// the tier's sliding window. Before: 30 of 35 admitted.
			t.Run("hole 2: a route listed twice", func(t *testing.T) {
				allowed, last := rest(t, 35, func(int) azRequest { return azRequest{path: "/v2/items", ip: "198.51.100.21"} })
				if name, _ := last.resp.Context["name"].(string); allowed != 10 || name != "GET /v2/items" {
					t.Errorf("%d of 35 admitted, the last answer naming %q; want 10, denied by GET /v2/items", allowed, name)
				}
				if !strings.Contains(rie.Logs(), "GET /v2/items is given twice") {
					t.Errorf("the duplicate route was not reported at start:\n%s", rie.Logs())
				}
			})

			// Hole 4: a 6to4 address is the IPv4 address it is derived
			// from: blocked with it, and counted in its bucket. Before:
			// the 6to4 address was allowed, and counted apart.
			t.Run("hole 4: 6to4 is its IPv4 address", func(t *testing.T) {
				a := azInvoke(t, rie, azRESTEvent(t, azRequest{path: "/v4/x", ip: "2002:cb00:7107::1"}))
				if blocked, _ := a.resp.Context["blocked"].(bool); !a.denied() || !blocked {
					t.Errorf("2002:cb00:7107::1 under 203.0.113.0/24=blocked: %+v, want a Deny that says blocked", a)
				}
				// 198.51.100.7 is 2002:c633:6407::/48.
				forms := []string{"198.51.100.7", "2002:c633:6407::1", "2002:c633:6407:1::2"}
				allowed, _ := rest(t, 9, func(i int) azRequest { return azRequest{path: "/v4/x", ip: forms[i%3]} })
				if allowed != 3 {
					t.Errorf("%d of 9 admitted from one IPv4 address and its 6to4 /48, want 3 (one bucket)", allowed)
				}
			})

			// Hole 5: a plan in shadow leaves its callers with their
			// tier's limits enforced beneath it, and the policy the
			// context advertises leaves the shadow limits out. Before: 60
			// of 60 admitted, the policy naming the shadow limit.
			t.Run("hole 5: a plan in shadow", func(t *testing.T) {
				allowed, last := rest(t, 60, func(int) azRequest {
					return azRequest{path: "/v5/x", ip: "198.51.100.51", headers: map[string]string{"x-api-key": strictKey}}
				})
				if name, _ := last.resp.Context["name"].(string); allowed != 20 || name != "org" {
					t.Errorf("%d of 60 admitted, the last answer naming %q; want 20, denied by the org tier", allowed, name)
				}
				if policy, _ := last.resp.Context["policy"].(string); strings.Contains(policy, "enterprise") || !strings.Contains(policy, `"org"`) {
					t.Errorf("context policy %q: want the org tier only, no shadow limit", policy)
				}
			})
		})
	}
}

// TestHostBitsRefused (hole 3): 10.0.0.0/0=unlimited, meant as /8, would
// be 0.0.0.0/0: every IPv4 caller unlimited, and the fail-closed login
// admitted with Redis down. The entry is refused at start, naming it, and
// the login fails closed. Before: Allow 20 of 20.
func TestHostBitsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	srv := redistest.StartServer(t)
	url := srv.URL()
	srv.Stop()
	rie := azStart(t, azEnv(url, testkit.RandomSecret(t), map[string]string{"RATE_LIMIT_NETWORKS": "10.0.0.0/0=unlimited"}))
	allowed := 0
	for i := range 20 {
		if a := azInvoke(t, rie, azRESTEvent(t, azRequest{method: "POST", path: "/auth/login", ip: fmt.Sprintf("10.1.2.%d", i)})); a.allowed() {
			allowed++
		}
	}
	if allowed != 0 {
		t.Errorf("%d of 20 logins admitted with Redis down, want none (the route fails closed)", allowed)
	}
	if logs := rie.Logs(); !strings.Contains(logs, "RATE_LIMIT_NETWORKS") || !strings.Contains(logs, "host bits") {
		t.Errorf("the entry was not refused at start, naming it:\n%s", logs)
	}
}
