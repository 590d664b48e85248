package identity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"

	"github.com/slidegate/slidegate/internal/identity"
)

// gatewayServer answers GetApiKeys, GetUsagePlans and GetUsagePlanKeys
// like API Gateway (HAL-style JSON: "item", and "position" for the next
// page), one item a page, so that every paginator has to follow positions.
type gatewayServer struct {
	*holdGate
	mu    sync.Mutex
	keys  []gwKey
	plans []gwPlan
	// failPlanKeys makes GetUsagePlanKeys fail.
	failPlanKeys bool
	// listings counts first pages of GetApiKeys: listings started.
	listings atomic.Int64
}

type gwKey struct {
	id, value string
	enabled   bool
}

type gwPlan struct {
	id     string
	apiIDs []string
	keyIDs []string
}

func newGatewayServer(t *testing.T, keys []gwKey, plans []gwPlan) (*gatewayServer, *apigateway.Client) {
	t.Helper()
	s := &gatewayServer{holdGate: newHoldGate(), keys: keys, plans: plans}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, apigateway.New(apigateway.Options{
		BaseEndpoint:     aws.String(hs.URL),
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		RetryMaxAttempts: 1,
	})
}

func (s *gatewayServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.Pass(r) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := r.URL.Query()
	var items []map[string]any
	switch path := r.URL.Path; {
	case r.Method != http.MethodGet:
		http.Error(w, `{"message":"method"}`, http.StatusNotFound)
		return
	case path == "/apikeys":
		if q.Get("position") == "" {
			s.listings.Add(1)
		}
		for _, k := range s.keys {
			item := map[string]any{"id": k.id, "name": "n-" + k.id, "enabled": k.enabled}
			if q.Get("includeValues") == "true" {
				item["value"] = k.value
			}
			items = append(items, item)
		}
	case path == "/usageplans":
		for _, p := range s.plans {
			var stages []map[string]string
			for _, api := range p.apiIDs {
				stages = append(stages, map[string]string{"apiId": api, "stage": "prod"})
			}
			items = append(items, map[string]any{"id": p.id, "name": "plan " + p.id, "apiStages": stages})
		}
	case strings.HasPrefix(path, "/usageplans/") && strings.HasSuffix(path, "/keys"):
		if s.failPlanKeys {
			w.Header().Set("X-Amzn-Errortype", "BadRequestException")
			http.Error(w, `{"message":"boom"}`, http.StatusBadRequest)
			return
		}
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/usageplans/"), "/keys")
		for _, p := range s.plans {
			if p.id != id {
				continue
			}
			for _, kid := range p.keyIDs {
				items = append(items, map[string]any{"id": kid, "type": "API_KEY", "name": "n-" + kid})
			}
		}
	default:
		http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		return
	}
	pos, _ := strconv.Atoi(q.Get("position"))
	out := map[string]any{"item": []map[string]any{}}
	if pos < len(items) {
		out["item"] = items[pos : pos+1]
	}
	if pos+1 < len(items) {
		out["position"] = strconv.Itoa(pos + 1)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *gatewayServer) attach(planID, keyID, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, gwKey{id: keyID, value: value, enabled: true})
	for i := range s.plans {
		if s.plans[i].id == planID {
			s.plans[i].keyIDs = append(s.plans[i].keyIDs, keyID)
		}
	}
}

// TestGatewayKeysOnlyThisAPI: a key is an org key on an API only when it is
// enabled and attached to a usage plan with a stage of that API.
func TestGatewayKeysOnlyThisAPI(t *testing.T) {
	_, api := newGatewayServer(t,
		[]gwKey{
			{"k1", "ours-1", true}, {"k2", "ours-2", true}, {"k3", "theirs", true},
			{"k4", "ours-disabled", false}, {"k5", "in-no-plan", true}, {"k6", "shared", true},
		},
		[]gwPlan{
			{id: "p-ours", apiIDs: []string{"api-ours"}, keyIDs: []string{"k1", "k2", "k4"}},
			{id: "p-theirs", apiIDs: []string{"api-theirs"}, keyIDs: []string{"k3"}},
			{id: "p-both", apiIDs: []string{"api-theirs", "api-ours"}, keyIDs: []string{"k6"}},
			{id: "p-no-stage", keyIDs: []string{"k5"}},
		})
	var logs bytes.Buffer
	keys := identity.NewGatewayKeys(api, 5*time.Minute, newClock().Now, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err := keys.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, apiID, key string
		want             identity.KeyStatus
	}{
		{"key of our plan (first page of plan keys)", "api-ours", "ours-1", identity.KeyKnown},
		{"key of our plan (second page of plan keys)", "api-ours", "ours-2", identity.KeyKnown},
		{"key of another API's plan", "api-ours", "theirs", identity.KeyUnknown},
		{"the same key on its own API", "api-theirs", "theirs", identity.KeyKnown},
		{"disabled key of our plan", "api-ours", "ours-disabled", identity.KeyUnknown},
		{"enabled key of a plan without stages", "api-ours", "in-no-plan", identity.KeyUnknown},
		{"key of a plan of two APIs", "api-ours", "shared", identity.KeyKnown},
		{"key never issued", "api-ours", "nope", identity.KeyUnknown},
		{"API without plans", "api-unknown", "ours-1", identity.KeyUnknown},
		{"no API id: every enabled key of the account", "", "theirs", identity.KeyKnown},
		{"no API id: disabled keys still unknown", "", "ours-disabled", identity.KeyUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := keys.Lookup(context.Background(), tc.apiID, identity.KeyHash(tc.key)); got != tc.want {
				t.Errorf("Lookup(%q, %q) = %v, want %v", tc.apiID, tc.key, got, tc.want)
			}
		})
	}
	if err := keys.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "request without an API id"); n != 1 {
		t.Errorf("the missing API id was warned about %d times, want once:\n%s", n, logs.String())
	}
	for _, v := range []string{"ours-1", "theirs", "shared"} {
		if strings.Contains(logs.String(), v) {
			t.Errorf("the log holds the key %q", v)
		}
	}
}

// TestGatewayKeysRefresh pins when the keys are listed again: on a stale
// list, and on an unknown key at most once per UnknownKeyRefreshInterval,
// each time in the background, the lookup that started it answered from
// the list it had.
func TestGatewayKeysRefresh(t *testing.T) {
	srv, api := newGatewayServer(t,
		[]gwKey{{"k1", "a", true}, {"k2", "b", true}, {"k3", "c", true}},
		[]gwPlan{{id: "p1", apiIDs: []string{"api"}, keyIDs: []string{"k1", "k2", "k3"}}})
	clk := newClock()
	keys := identity.NewGatewayKeys(api, 5*time.Minute, clk.Now, nil)
	ctx := context.Background()
	if err := keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name         string
		advance      time.Duration
		attachKey    string
		failListing  bool
		lookup       string
		want         identity.KeyStatus
		wantListings int64 // cumulative, the cold-start one included
	}{
		{"known key: no listing", time.Second, "", false, "a", identity.KeyKnown, 1},
		{"unknown key within the interval: no listing", time.Second, "", false, "zzz", identity.KeyUnknown, 1},
		{"new key after the interval: refused, and one listing starts", identity.UnknownKeyRefreshInterval, "d", false, "d", identity.KeyUnknown, 2},
		{"the new key once that listing ended", time.Second, "", false, "d", identity.KeyKnown, 2},
		{"another unknown key right after: no listing", time.Second, "", false, "yyy", identity.KeyUnknown, 2},
		{"stale list: answered from it, listed again", 5 * time.Minute, "", false, "a", identity.KeyKnown, 3},
		{"a failed listing keeps the list", 5 * time.Minute, "", true, "b", identity.KeyKnown, 4},
		{"and is not retried within the interval", time.Second, "", false, "c", identity.KeyKnown, 4},
		{"but after it", identity.UnknownKeyRefreshInterval, "", false, "c", identity.KeyKnown, 5},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		if s.attachKey != "" {
			srv.attach("p1", "id-"+s.attachKey, s.attachKey)
		}
		srv.mu.Lock()
		srv.failPlanKeys = s.failListing
		srv.mu.Unlock()
		if got := keys.Lookup(ctx, "api", identity.KeyHash(s.lookup)); got != s.want {
			t.Errorf("%s: Lookup = %v, want %v", s.name, got, s.want)
		}
		err := keys.Wait(ctx)
		if (err != nil) != s.failListing {
			t.Errorf("%s: listing error %v, want failure %v", s.name, err, s.failListing)
		}
		if got := srv.listings.Load(); got != s.wantListings {
			t.Errorf("%s: %d listings so far, want %d", s.name, got, s.wantListings)
		}
	}
}

// TestGatewayKeysNeverWait: no lookup waits for a listing, at cold start
// or later; a listing in flight serves the previous list, and concurrent
// triggers share one listing.
func TestGatewayKeysNeverWait(t *testing.T) {
	srv, api := newGatewayServer(t,
		[]gwKey{{"k1", "a", true}},
		[]gwPlan{{id: "p1", apiIDs: []string{"api"}, keyIDs: []string{"k1"}}})
	clk := newClock()
	keys := identity.NewGatewayKeys(api, 5*time.Minute, clk.Now, nil)
	ctx := context.Background()

	release := srv.Hold()
	defer release()
	// The cold-start deadline passes while the first listing is held.
	deadline, cancel := context.WithCancel(ctx)
	cancel()
	if err := keys.Refresh(deadline); !errors.Is(err, context.Canceled) {
		t.Fatalf("Refresh past its deadline = %v, want context.Canceled", err)
	}
	srv.Entered()
	for _, key := range []string{"a", "zzz"} {
		if got := keys.Lookup(ctx, "api", identity.KeyHash(key)); got != identity.KeyUnverifiable {
			t.Errorf("Lookup(%q) before any listing = %v, want KeyUnverifiable", key, got)
		}
	}
	if srv.Held() != 1 {
		t.Fatalf("%d requests held after the lookups, want the first listing's one: a lookup waited for it", srv.Held())
	}
	release()
	if err := keys.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := keys.Lookup(ctx, "api", identity.KeyHash("a")); got != identity.KeyKnown {
		t.Fatalf("Lookup after the first listing = %v", got)
	}

	// A stale list, then a listing that hangs.
	release = srv.Hold()
	defer release()
	clk.Advance(5 * time.Minute)
	srv.attach("p1", "k2", "b")
	if got := keys.Lookup(ctx, "api", identity.KeyHash("a")); got != identity.KeyKnown {
		t.Errorf("known key on a stale list = %v, want KeyKnown", got)
	}
	srv.Entered()
	for _, tc := range []struct {
		key  string
		want identity.KeyStatus
	}{{"a", identity.KeyKnown}, {"b", identity.KeyUnknown}, {"zzz", identity.KeyUnknown}} {
		if got := keys.Lookup(ctx, "api", identity.KeyHash(tc.key)); got != tc.want {
			t.Errorf("Lookup(%q) while a listing hangs = %v, want %v", tc.key, got, tc.want)
		}
	}
	if srv.Held() != 1 {
		t.Fatalf("%d requests held after the lookups, want 1: a lookup waited or a second listing started", srv.Held())
	}
	release()
	if err := keys.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := keys.Lookup(ctx, "api", identity.KeyHash("b")); got != identity.KeyKnown {
		t.Errorf("key attached during the stale period, after the listing = %v, want KeyKnown", got)
	}
	if got := srv.listings.Load(); got != 2 {
		t.Errorf("%d listings, want 2", got)
	}
}

// TestGatewayKeysUnreachable: a list that was never read leaves keys
// unverifiable (the caller is counted as anonymous, not refused), and a
// failing API is asked again at most once per interval.
func TestGatewayKeysUnreachable(t *testing.T) {
	var calls atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("X-Amzn-Errortype", "BadRequestException")
		http.Error(w, `{"message":"boom"}`, http.StatusBadRequest)
	}))
	defer hs.Close()
	api := apigateway.New(apigateway.Options{
		BaseEndpoint: aws.String(hs.URL), Region: "us-east-1", RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	keys := identity.NewGatewayKeys(api, time.Minute, newClock().Now, nil)
	ctx := context.Background()
	if err := keys.Refresh(ctx); err == nil {
		t.Fatal("Refresh against a failing API succeeded")
	}
	for i := 0; i < 3; i++ {
		if got := keys.Lookup(ctx, "api", identity.KeyHash("k")); got != identity.KeyUnverifiable {
			t.Errorf("Lookup = %v, want KeyUnverifiable", got)
		}
		if err := keys.Wait(ctx); err != nil {
			t.Errorf("a listing ran within the retry interval: %v", err)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("%d API calls, want the cold-start one only", got)
	}
}
