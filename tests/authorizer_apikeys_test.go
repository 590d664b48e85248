package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestAuthorizerAPIGatewayKeys: with API_KEY_HASHES unset, the bootstrap
// under the emulator lists the API Gateway keys and usage plans through the
// real aws-sdk-go-v2 client (SigV4-signed, every page, values included),
// pointed at moto_server with AWS_ENDPOINT_URL_API_GATEWAY. Enabled
// keys attached to a usage plan of the event's API and stage, on any page,
// are org callers; disabled and unknown keys are not, and neither are keys
// of another API's plans, of another stage's plans, or of no plan.
func TestAuthorizerAPIGatewayKeys(t *testing.T) {
	srv := redistest.StartServer(t)
	gw, _ := mototest.NewGateway(t, mototest.ExampleKeys(), mototest.ExampleUsagePlans())

	env := azEnv(srv.URL(), testkit.RandomSecret(t), gw.Env())
	delete(env, "API_KEY_HASHES")
	rie := azStart(t, env)

	cases := []struct {
		name, key, stage string
		wantOrg          bool
		unauthorized     bool
		// needsAPIID: the answer depends on the event's apiId and stage
		// reaching the key store; without them every enabled key of the
		// account, or of every stage of the API, is trusted (logged as a
		// warning).
		needsAPIID bool
	}{
		{"key of our plan, first page", "gw-key-page-1-a-padded", "prod", true, false, false},
		{"key of our second plan, first page of its keys", "gw-key-page-2-padded", "prod", true, false, false},
		{"key of our second plan, second page of its keys", "gw-key-page-3-padded", "prod", true, false, false},
		{"disabled key of our plan", "gw-key-disabled-padded", "prod", false, true, false},
		{"unknown key", "gw-key-never-issued-padded", "prod", false, true, false},
		{"key of another API's plan", "gw-key-of-another-api-padded", "prod", false, true, true},
		{"enabled key of no plan", "gw-key-in-no-plan-padded", "prod", false, true, true},
		{"key of our dev stage's plan, on dev", "gw-key-dev-only-padded", "dev", true, false, false},
		{"key of our dev stage's plan, on prod", "gw-key-dev-only-padded", "prod", false, true, true},
		{"key of our prod stage's plan, on dev", "gw-key-page-1-a-padded", "dev", false, true, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: fmt.Sprintf("192.0.2.%d", 10+i), stage: tc.stage, headers: map[string]string{"x-api-key": tc.key}}))
			if tc.needsAPIID && strings.Contains(rie.Logs(), "request without an API id") {
				t.Fatalf("the event's apiId did not reach the key store: every enabled key of the account would be trusted")
			}
			if tc.needsAPIID && strings.Contains(rie.Logs(), "request without a stage") {
				t.Fatalf("the event's stage did not reach the key store: keys of every stage of the API would be trusted")
			}
			if a.unauthorized != tc.unauthorized {
				t.Fatalf("unauthorized = %v, want %v (%+v)", a.unauthorized, tc.unauthorized, a)
			}
			if tc.wantOrg && (!a.allowed() || a.resp.Context["tier"] != "org" || a.resp.UsageIdentifierKey != tc.key) {
				t.Errorf("want Allow as org with usageIdentifierKey, got %+v", a)
			}
		})
	}

	listings := gw.RequestsTo("/apikeys")
	if len(listings) < 4 { // 8 keys, two a page
		t.Fatalf("GetApiKeys: %d requests, want at least the 4 pages", len(listings))
	}
	for _, r := range listings {
		if r.URL.Query().Get("includeValues") != "true" {
			t.Errorf("request %s without includeValues=true", r.URL)
		}
	}
	if got := len(gw.RequestsTo("/usageplans")); got < 2 {
		t.Errorf("GetUsagePlans: %d requests, want at least the 2 pages", got)
	}
	for _, plan := range []string{"p-gold", "p-silver", "p-other"} {
		if got := len(gw.RequestsTo("/usageplans/" + plan + "/keys")); got < 1 {
			t.Errorf("GetUsagePlanKeys of %s: never asked", plan)
		}
	}
	if got := len(gw.RequestsTo("/usageplans/p-gold/keys")); got < 2 {
		t.Errorf("GetUsagePlanKeys of p-gold: %d requests, want at least the 2 pages", got)
	}
	// Keys are listed at most once per API_KEYS_REFRESH (5m), whatever
	// the keys presented: the unknown keys above, seconds apart, cost no
	// listing beyond the cold-start one (4 pages).
	if len(listings) > 4 {
		t.Errorf("GetApiKeys: %d requests: unknown keys refreshed the list within the interval", len(listings))
	}
}
