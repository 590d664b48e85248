package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/slidegate/slidegate/internal/redistest"
)

// fakeAPIGateway answers GET /apikeys like API Gateway's REST API does
// (HAL-style JSON: "item" and a "position" for the next page), two keys a
// page, so that the SDK's paginator has to follow positions.
type fakeAPIGateway struct {
	mu       sync.Mutex
	keys     []fakeAPIKey
	requests []*http.Request
}

type fakeAPIKey struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Value   string `json:"value,omitempty"`
	Enabled bool   `json:"enabled"`
}

func (f *fakeAPIGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Clone(r.Context()))
	if r.Method != http.MethodGet || r.URL.Path != "/apikeys" {
		http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		http.Error(w, `{"message":"Missing Authentication Token"}`, http.StatusForbidden)
		return
	}
	start := 0
	if p := r.URL.Query().Get("position"); p != "" {
		for i, k := range f.keys {
			if k.ID == p {
				start = i
			}
		}
	}
	end := min(start+2, len(f.keys))
	page := make([]fakeAPIKey, 0, 2)
	for _, k := range f.keys[start:end] {
		if r.URL.Query().Get("includeValues") != "true" {
			k.Value = ""
		}
		page = append(page, k)
	}
	out := map[string]any{"item": page}
	if end < len(f.keys) {
		out["position"] = f.keys[end].ID
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// TestAuthorizerAPIGatewayKeys: with API_KEY_HASHES unset, the bootstrap
// under the emulator lists the API Gateway keys through the real
// aws-sdk-go-v2 client (SigV4-signed, every page, values included),
// pointed at a local endpoint with AWS_ENDPOINT_URL_API_GATEWAY. Enabled
// keys of any page are org callers; disabled and unknown keys are not.
func TestAuthorizerAPIGatewayKeys(t *testing.T) {
	srv := redistest.StartServer(t)
	gw := &fakeAPIGateway{keys: []fakeAPIKey{
		{ID: "k1", Name: "one", Value: "gw-key-page-1-a", Enabled: true},
		{ID: "k2", Name: "two", Value: "gw-key-page-1-b", Enabled: true},
		{ID: "k3", Name: "three", Value: "gw-key-disabled", Enabled: false},
		{ID: "k4", Name: "four", Value: "gw-key-page-2", Enabled: true},
		{ID: "k5", Name: "five", Value: "gw-key-page-3", Enabled: true},
	}}
	api := httptest.NewServer(gw)
	t.Cleanup(api.Close)

	env := azEnv(srv.URL(), azSecret(t), map[string]string{
		"API_KEY_HASHES":               "",
		"AWS_ENDPOINT_URL_API_GATEWAY": api.URL,
		"AWS_ACCESS_KEY_ID":            "AKIDEXAMPLETEST",
		"AWS_SECRET_ACCESS_KEY":        "test-secret-not-real",
		"AWS_REGION":                   "us-east-1",
	})
	delete(env, "API_KEY_HASHES")
	rie := azStart(t, env)

	cases := []struct {
		name, key    string
		wantOrg      bool
		unauthorized bool
	}{
		{"key on the first page", "gw-key-page-1-a", true, false},
		{"key on the second page", "gw-key-page-2", true, false},
		{"key on the last page", "gw-key-page-3", true, false},
		{"disabled key", "gw-key-disabled", false, true},
		{"unknown key", "gw-key-never-issued", false, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: fmt.Sprintf("192.0.2.%d", 10+i), headers: map[string]string{"x-api-key": tc.key}}))
			if a.unauthorized != tc.unauthorized {
				t.Fatalf("unauthorized = %v, want %v (%+v)", a.unauthorized, tc.unauthorized, a)
			}
			if tc.wantOrg && (!a.allowed() || a.resp.Context["tier"] != "org" || a.resp.UsageIdentifierKey != tc.key) {
				t.Errorf("want Allow as org with usageIdentifierKey, got %+v", a)
			}
		})
	}

	gw.mu.Lock()
	defer gw.mu.Unlock()
	if len(gw.requests) < 3 {
		t.Fatalf("API Gateway saw %d requests, want at least the 3 pages", len(gw.requests))
	}
	for _, r := range gw.requests {
		if r.URL.Query().Get("includeValues") != "true" {
			t.Errorf("request %s without includeValues=true", r.URL)
		}
	}
	// Unknown keys may refresh the list at most once per interval: the two
	// unknown keys above, seconds apart, cost no more than one extra listing.
	if len(gw.requests) > 6 {
		t.Errorf("API Gateway saw %d requests: unknown keys refreshed the list too often", len(gw.requests))
	}
}
