package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/apigateway"

	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// fakeAPIGateway is the API Gateway of an empty account on the shared
// moto_server, filled through the SDK with the keys and usage plans of a
// test, and the proxy in front of it that the code under test calls: it
// cuts moto's one-page listings into pages of two items, so that the SDK's
// paginators have to follow positions; holds requests while its gate is
// held; and records the requests.
type fakeAPIGateway struct {
	*mototest.Proxy
	gate    *holdGate
	t       testing.TB
	account *mototest.Account
	// keyIDs maps a test's key id to moto's; planIDs a test's plan id to
	// moto's, and plans lists moto's in the test's order.
	keyIDs, planIDs map[string]string
	plans           []string
}

type fakeAPIKey struct {
	ID      string
	Name    string
	Value   string // at least 20 characters, as API Gateway requires
	Enabled bool
}

// fakeUsagePlan is a usage plan with the API stages of Stages ("apiId" for
// the stage prod of that API, or "apiId/stage") and the keys of KeyIDs
// attached.
type fakeUsagePlan struct {
	ID     string
	Stages []string
	KeyIDs []string
}

// newFakeAPIGateway fills a new account and returns it with the proxy's URL.
func newFakeAPIGateway(t testing.TB, keys []fakeAPIKey, plans []fakeUsagePlan) (*fakeAPIGateway, string) {
	t.Helper()
	moto := mototest.Shared(t)
	account := moto.Account(t)
	proxy := moto.Proxy(t, account)
	proxy.SetPageSize(2)
	gw := &fakeAPIGateway{Proxy: proxy, gate: proxy.Gate, t: t, account: account,
		keyIDs: map[string]string{}, planIDs: map[string]string{}}
	for _, k := range keys {
		gw.keyIDs[k.ID] = account.CreateAPIKey(t, k.Value, k.Enabled)
	}
	for _, p := range plans {
		var stages []mototest.Stage
		for _, st := range p.Stages {
			api, stage, ok := strings.Cut(st, "/")
			if !ok {
				stage = "prod"
			}
			stages = append(stages, mototest.Stage{APIID: api, Stage: stage})
		}
		id := account.CreateUsagePlan(t, "plan "+p.ID, nil, stages...)
		gw.planIDs[p.ID] = id
		gw.plans = append(gw.plans, id)
		for _, k := range p.KeyIDs {
			account.AttachAPIKey(t, id, gw.keyIDs[k])
		}
	}
	return gw, proxy.Account.Endpoint
}

// addKey creates an enabled key and attaches it to the plan-th usage plan.
func (f *fakeAPIGateway) addKey(k fakeAPIKey, plan int) {
	f.keyIDs[k.ID] = f.account.CreateAPIKey(f.t, k.Value, true)
	f.account.AttachAPIKey(f.t, f.plans[plan], f.keyIDs[k.ID])
}

// client is the real SDK client of the account, through the proxy.
func (f *fakeAPIGateway) client() *apigateway.Client {
	return apigateway.NewFromConfig(f.Account.Config)
}

// env points a process's SDK at the account, through the proxy.
func (f *fakeAPIGateway) env() map[string]string {
	env := f.Account.Env()
	delete(env, "AWS_ENDPOINT_URL")
	env["AWS_ENDPOINT_URL_API_GATEWAY"] = f.Account.Endpoint
	return env
}

// requestsTo returns the requests seen so far for path (exact, or a prefix
// when it ends with "*"), in which a test's usage plan id stands for moto's.
func (f *fakeAPIGateway) requestsTo(path string) []*http.Request {
	for test, moto := range f.planIDs {
		path = strings.Replace(path, "/usageplans/"+test+"/", "/usageplans/"+moto+"/", 1)
	}
	var out []*http.Request
	for _, r := range f.Requests() {
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
		{ID: "k1", Name: "one", Value: "gw-key-page-1-a-padded", Enabled: true},
		{ID: "k2", Name: "two", Value: "gw-key-page-1-b-padded", Enabled: true},
		{ID: "k3", Name: "three", Value: "gw-key-disabled-padded", Enabled: false},
		{ID: "k4", Name: "four", Value: "gw-key-page-2-padded", Enabled: true},
		{ID: "k5", Name: "five", Value: "gw-key-page-3-padded", Enabled: true},
		{ID: "k6", Name: "six", Value: "gw-key-of-another-api-padded", Enabled: true},
		{ID: "k7", Name: "seven", Value: "gw-key-in-no-plan-padded", Enabled: true},
		{ID: "k9", Name: "nine", Value: "gw-key-dev-only-padded", Enabled: true},
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
// pointed at moto_server with AWS_ENDPOINT_URL_API_GATEWAY. Enabled
// keys attached to a usage plan of the event's API and stage, on any page,
// are org callers; disabled and unknown keys are not, and neither are keys
// of another API's plans, of another stage's plans, or of no plan.
func TestAuthorizerAPIGatewayKeys(t *testing.T) {
	srv := redistest.StartServer(t)
	gw, _ := newFakeAPIGateway(t, azGatewayKeys, azUsagePlans)

	env := azEnv(srv.URL(), azSecret(t), gw.env())
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
