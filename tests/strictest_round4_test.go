package tests

import (
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit"
)

// The holes of issue 37 ("the strictest reading, round four") that the
// built authorizer answers, under the Lambda emulator on a real Redis. The
// figures of docs/security.md's round four are these counts.
func TestStrictestRoundFourThroughTheAuthorizer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	secret := testkit.RandomSecret(t)
	single := planTopologies(t)[0]
	rie := azStart(t, planEnv(single, secret, map[string]string{
		"RATE_LIMIT_ANONYMOUS":   "30/1h",
		"RATE_LIMIT_PLANS":       "scrapers=3/1h",
		"RATE_LIMIT_NETWORKS":    "203.0.113.0/24=scrapers",
		"RATE_LIMIT_FAIL_CLOSED": "/auth/*",
	}))

	// Hole 2: a network plan stricter than the tier, through every
	// spelling of one IPv4 address (its 6to4 /48 included, which is
	// counted as the address). Before: 33 of 160 admitted (3, then 30
	// more through the 6to4 form, read as the tier's).
	t.Run("hole 2: a stricter network plan through 6to4", func(t *testing.T) {
		allowed := 0
		for _, ip := range []string{"203.0.113.7", "::ffff:203.0.113.7", "2002:cb00:7107::1", "2002:cb00:7107:1::2"} {
			for range 40 {
				a := azInvoke(t, rie, azRESTEvent(t, azRequest{path: "/v1/items", ip: ip}))
				switch {
				case a.allowed():
					allowed++
				case !a.denied():
					t.Fatalf("%s: neither allowed nor denied: %+v", ip, a)
				}
			}
		}
		if allowed != 3 {
			t.Errorf("%d of 160 admitted from 203.0.113.7 in four spellings, want 3 (scrapers=3/1h)", allowed)
		}
	})

	// Hole 4: AWS's own TOKEN sample event (type, authorizationToken,
	// methodArn, nothing else) is a misconfiguration: Unauthorized, never
	// Allow, logged once (with Redis down too: internal/authorizer).
	// Before: Allow, counted in the shared bucket of addresses that do not
	// parse, and the login admitted with Redis down.
	t.Run("hole 4: a TOKEN event", func(t *testing.T) {
		token := func(route string) []byte {
			return []byte(`{"type":"TOKEN","authorizationToken":"incoming-client-token","methodArn":"arn:aws:execute-api:us-east-1:123456789012:example/prod/` + route + `"}`)
		}
		for i := range 5 {
			if a := azInvoke(t, rie, token("GET/v1/items")); !a.unauthorized {
				t.Fatalf("TOKEN event %d: %+v, want Unauthorized", i+1, a)
			}
		}
		if n := strings.Count(rie.Logs(), "TOKEN authorizer event"); n != 1 {
			t.Errorf("the misconfiguration logged %d times, want once", n)
		}
		if strings.Contains(rie.Logs(), "incoming-client-token") {
			t.Error("the token reached the log")
		}
	})
}
