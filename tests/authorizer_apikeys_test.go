package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// fakeAPIGateway answers GetApiKeys (GET /apikeys), GetUsagePlans
// (GET /usageplans) and GetUsagePlanKeys (GET /usageplans/{id}/keys) like
// API Gateway's REST API does (HAL-style JSON: "item", and a "position" for
// the next page), two items a page, so that the SDK's paginators have to
// follow positions. Requests without a SigV4 signature are refused.
// Requests wait while the gate is held (identity_support_test.go).
type fakeAPIGateway struct {
	gate     *holdGate
	mu       sync.Mutex
	keys     []fakeAPIKey
	plans    []fakeUsagePlan
	requests []*http.Request
}

type fakeAPIKey struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Value   string `json:"value,omitempty"`
	Enabled bool   `json:"enabled"`
}

// fakeUsagePlan is a usage plan with the API stages of Stages ("apiId" for
// the stage prod of that API, or "apiId/stage") and the keys of KeyIDs
// attached.
type fakeUsagePlan struct {
	ID     string
	Stages []string
	KeyIDs []string
}

func newFakeAPIGateway(t testing.TB, keys []fakeAPIKey, plans []fakeUsagePlan) (*fakeAPIGateway, string) {
	t.Helper()
	gw := &fakeAPIGateway{gate: newHoldGate(), keys: keys, plans: plans}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return gw, srv.URL
}

func (f *fakeAPIGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !f.gate.Pass(r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Clone(r.Context()))
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		http.Error(w, `{"message":"Missing Authentication Token"}`, http.StatusForbidden)
		return
	}
	q := r.URL.Query()
	type item struct {
		id   string
		body any
	}
	var items []item
	switch path := r.URL.Path; {
	case r.Method != http.MethodGet:
		http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		return
	case path == "/apikeys":
		for _, k := range f.keys {
			if q.Get("includeValues") != "true" {
				k.Value = ""
			}
			items = append(items, item{k.ID, k})
		}
	case path == "/usageplans":
		for _, p := range f.plans {
			stages := []map[string]string{}
			for _, st := range p.Stages {
				api, stage, ok := strings.Cut(st, "/")
				if !ok {
					stage = "prod"
				}
				stages = append(stages, map[string]string{"apiId": api, "stage": stage})
			}
			items = append(items, item{p.ID, map[string]any{"id": p.ID, "name": "plan " + p.ID, "apiStages": stages}})
		}
	case strings.HasPrefix(path, "/usageplans/") && strings.HasSuffix(path, "/keys"):
		planID := strings.TrimSuffix(strings.TrimPrefix(path, "/usageplans/"), "/keys")
		for _, p := range f.plans {
			if p.ID != planID {
				continue
			}
			for _, id := range p.KeyIDs {
				for _, k := range f.keys {
					if k.ID == id {
						items = append(items, item{id, map[string]any{"id": id, "type": "API_KEY", "name": k.Name, "value": k.Value}})
					}
				}
			}
		}
	default:
		http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		return
	}
	start := 0
	if p := q.Get("position"); p != "" {
		for i, it := range items {
			if it.id == p {
				start = i
			}
		}
	}
	end := min(start+2, len(items))
	page := make([]any, 0, 2)
	for _, it := range items[start:end] {
		page = append(page, it.body)
	}
	out := map[string]any{"item": page}
	if end < len(items) {
		out["position"] = items[end].id
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// requestsTo returns the requests seen so far for path (exact, or a prefix
// when it ends with "*").
func (f *fakeAPIGateway) requestsTo(path string) []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*http.Request
	for _, r := range f.requests {
		if r.URL.Path == path || (strings.HasSuffix(path, "*") && strings.HasPrefix(r.URL.Path, strings.TrimSuffix(path, "*"))) {
			out = append(out, r)
		}
	}
	return out
}

// azGatewayKeys are the account's keys in the authorizer tests: the API
// of the test events (a1b2c3d4e5) has two usage plans on its stage prod
// and one on its stage dev, another API has one.
var (
	azGatewayKeys = []fakeAPIKey{
		{ID: "k1", Name: "one", Value: "gw-key-page-1-a", Enabled: true},
		{ID: "k2", Name: "two", Value: "gw-key-page-1-b", Enabled: true},
		{ID: "k3", Name: "three", Value: "gw-key-disabled", Enabled: false},
		{ID: "k4", Name: "four", Value: "gw-key-page-2", Enabled: true},
		{ID: "k5", Name: "five", Value: "gw-key-page-3", Enabled: true},
		{ID: "k6", Name: "six", Value: "gw-key-of-another-api", Enabled: true},
		{ID: "k7", Name: "seven", Value: "gw-key-in-no-plan", Enabled: true},
		{ID: "k9", Name: "nine", Value: "gw-key-dev-only", Enabled: true},
	}
	azUsagePlans = []fakeUsagePlan{
		{ID: "p-other", Stages: []string{"zzzzzzzzzz"}, KeyIDs: []string{"k6"}},
		{ID: "p-gold", Stages: []string{"a1b2c3d4e5"}, KeyIDs: []string{"k1", "k2", "k3"}},
		{ID: "p-silver", Stages: []string{"zzzzzzzzzz", "a1b2c3d4e5"}, KeyIDs: []string{"k4", "k5"}},
		{ID: "p-dev", Stages: []string{"a1b2c3d4e5/dev"}, KeyIDs: []string{"k9"}},
	}
)

// TestAuthorizerAPIGatewayKeys: with API_KEY_HASHES unset, the bootstrap
// under the emulator lists the API Gateway keys and usage plans through the
// real aws-sdk-go-v2 client (SigV4-signed, every page, values included),
// pointed at a local endpoint with AWS_ENDPOINT_URL_API_GATEWAY. Enabled
// keys attached to a usage plan of the event's API and stage, on any page,
// are org callers; disabled and unknown keys are not, and neither are keys
// of another API's plans, of another stage's plans, or of no plan.
func TestAuthorizerAPIGatewayKeys(t *testing.T) {
	srv := redistest.StartServer(t)
	gw, url := newFakeAPIGateway(t, azGatewayKeys, azUsagePlans)

	env := azEnv(srv.URL(), azSecret(t), map[string]string{
		"AWS_ENDPOINT_URL_API_GATEWAY": url,
		"AWS_ACCESS_KEY_ID":            "AKIDEXAMPLETEST",
		"AWS_SECRET_ACCESS_KEY":        "test-secret-not-real",
		"AWS_REGION":                   "us-east-1",
	})
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
		{"key of our plan, first page", "gw-key-page-1-a", "prod", true, false, false},
		{"key of our second plan, first page of its keys", "gw-key-page-2", "prod", true, false, false},
		{"key of our second plan, second page of its keys", "gw-key-page-3", "prod", true, false, false},
		{"disabled key of our plan", "gw-key-disabled", "prod", false, true, false},
		{"unknown key", "gw-key-never-issued", "prod", false, true, false},
		{"key of another API's plan", "gw-key-of-another-api", "prod", false, true, true},
		{"enabled key of no plan", "gw-key-in-no-plan", "prod", false, true, true},
		{"key of our dev stage's plan, on dev", "gw-key-dev-only", "dev", true, false, false},
		{"key of our dev stage's plan, on prod", "gw-key-dev-only", "prod", false, true, true},
		{"key of our prod stage's plan, on dev", "gw-key-page-1-a", "dev", false, true, true},
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

	listings := gw.requestsTo("/apikeys")
	if len(listings) < 4 { // 8 keys, two a page
		t.Fatalf("GetApiKeys: %d requests, want at least the 4 pages", len(listings))
	}
	for _, r := range listings {
		if r.URL.Query().Get("includeValues") != "true" {
			t.Errorf("request %s without includeValues=true", r.URL)
		}
	}
	if got := len(gw.requestsTo("/usageplans")); got < 2 {
		t.Errorf("GetUsagePlans: %d requests, want at least the 2 pages", got)
	}
	for _, plan := range []string{"p-gold", "p-silver", "p-other"} {
		if got := len(gw.requestsTo("/usageplans/" + plan + "/keys")); got < 1 {
			t.Errorf("GetUsagePlanKeys of %s: never asked", plan)
		}
	}
	if got := len(gw.requestsTo("/usageplans/p-gold/keys")); got < 2 {
		t.Errorf("GetUsagePlanKeys of p-gold: %d requests, want at least the 2 pages", got)
	}
	// Keys are listed at most once per API_KEYS_REFRESH (5m), whatever
	// the keys presented: the unknown keys above, seconds apart, cost no
	// listing beyond the cold-start one (4 pages).
	if len(listings) > 4 {
		t.Errorf("GetApiKeys: %d requests: unknown keys refreshed the list within the interval", len(listings))
	}
}
