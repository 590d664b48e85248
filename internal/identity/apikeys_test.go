package identity_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/apigateway"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
)

// gatewayServer is an account's API Gateway on the shared moto_server,
// filled through the SDK, and the proxy in front of it that the client under
// test calls. The proxy pages moto's listings (moto answers in one page) one
// item a page unless honourLimit, so that every paginator has to follow
// positions; counts the calls; fails GetUsagePlanKeys on failPlanKeys (moto
// never fails); and holds requests (holdgate).
type gatewayServer struct {
	*mototest.Proxy
	t       *testing.T
	account *mototest.Account
	// keyIDs maps a test's key id to moto's; planIDs a test's plan id to
	// moto's.
	keyIDs, planIDs map[string]string
}

type gwKey struct {
	id, value string
	enabled   bool
}

// gwPlan is a usage plan. Each of its stages is "apiId/stage", or "apiId"
// for the stage prod.
type gwPlan struct {
	id     string
	stages []string
	keyIDs []string
	// name is the usage plan's name ("plan <id>" when empty); tags its
	// tags.
	name string
	tags map[string]string
}

func newGatewayServer(t *testing.T, keys []gwKey, plans []gwPlan) (*gatewayServer, *apigateway.Client) {
	t.Helper()
	moto := mototest.Shared(t)
	account := moto.Account(t)
	s := &gatewayServer{Proxy: moto.Proxy(t, account), t: t, account: account,
		keyIDs: map[string]string{}, planIDs: map[string]string{}}
	s.SetPageSize(1)
	for _, k := range keys {
		s.keyIDs[k.id] = account.CreateAPIKey(t, apiKeyValue(k.value), k.enabled)
	}
	for _, p := range plans {
		var stages []mototest.Stage
		for _, st := range p.stages {
			api, stage, ok := strings.Cut(st, "/")
			if !ok {
				stage = "prod"
			}
			stages = append(stages, mototest.Stage{APIID: api, Stage: stage})
		}
		name := p.name
		if name == "" {
			name = "plan " + p.id
		}
		s.planIDs[p.id] = account.CreateUsagePlan(t, name, p.tags, stages...)
		for _, kid := range p.keyIDs {
			account.AttachAPIKey(t, s.planIDs[p.id], s.keyIDs[kid])
		}
	}
	return s, apigateway.NewFromConfig(s.Account.Config)
}

// apiKeyValue is the API key a test calls value: API Gateway (and moto)
// refuse a key shorter than 20 characters.
func apiKeyValue(value string) string { return value + "-padded-to-20-chars" }

// keyHash is the hash of the API key a test calls value.
func keyHash(value string) string { return identity.KeyHash(apiKeyValue(value)) }

// setFailPlanKeys makes GetUsagePlanKeys fail (a 400), or not.
func (s *gatewayServer) setFailPlanKeys(fail bool) {
	if !fail {
		s.Fail(nil)
		return
	}
	s.Fail(func(op string) *mototest.Fault {
		if op == "GetUsagePlanKeys" {
			return &mototest.Fault{Status: http.StatusBadRequest, Type: "BadRequestException", Message: "boom"}
		}
		return nil
	})
}

// honourLimit makes pages as long as the request's limit, as API Gateway
// does (up to 500): the call count of a real listing.
func (s *gatewayServer) honourLimit() { s.SetPageSize(500) }

// revoke disables the key keyID.
func (s *gatewayServer) revoke(keyID string) { s.account.DisableAPIKey(s.t, s.keyIDs[keyID]) }

// attach creates a key of the value and attaches it to the plan planID.
func (s *gatewayServer) attach(planID, keyID, value string) {
	s.keyIDs[keyID] = s.account.CreateAPIKey(s.t, apiKeyValue(value), true)
	s.account.AttachAPIKey(s.t, s.planIDs[planID], s.keyIDs[keyID])
}

// TestGatewayKeysOnlyThisAPI: a key is an org key on a stage of an API
// only when it is enabled and attached to a usage plan with that stage of
// that API.
func TestGatewayKeysOnlyThisAPI(t *testing.T) {
	_, api := newGatewayServer(t,
		[]gwKey{
			{"k1", "ours-1", true}, {"k2", "ours-2", true}, {"k3", "theirs", true},
			{"k4", "ours-disabled", false}, {"k5", "in-no-plan", true}, {"k6", "shared", true},
			{"k7", "prod-only", true}, {"k8", "dev-only", true}, {"k9", "both-stages", true},
		},
		[]gwPlan{
			{id: "p-ours", stages: []string{"api-ours"}, keyIDs: []string{"k1", "k2", "k4"}},
			{id: "p-theirs", stages: []string{"api-theirs"}, keyIDs: []string{"k3"}},
			{id: "p-both", stages: []string{"api-theirs", "api-ours"}, keyIDs: []string{"k6"}},
			{id: "p-no-stage", keyIDs: []string{"k5"}},
			{id: "p-prod", stages: []string{"api-staged/prod"}, keyIDs: []string{"k7", "k9"}},
			{id: "p-dev", stages: []string{"api-staged/dev", "api-theirs/dev"}, keyIDs: []string{"k8", "k9"}},
		})
	var logs bytes.Buffer
	keys := identity.NewGatewayKeys(api, 5*time.Minute, newClock().Now, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err := keys.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, apiID, stage, key string
		want                    identity.KeyStatus
	}{
		{"key of our plan (first page of plan keys)", "api-ours", "prod", "ours-1", identity.KeyKnown},
		{"key of our plan (second page of plan keys)", "api-ours", "prod", "ours-2", identity.KeyKnown},
		{"key of another API's plan", "api-ours", "prod", "theirs", identity.KeyUnknown},
		{"the same key on its own API", "api-theirs", "prod", "theirs", identity.KeyKnown},
		{"disabled key of our plan", "api-ours", "prod", "ours-disabled", identity.KeyUnknown},
		{"enabled key of a plan without stages", "api-ours", "prod", "in-no-plan", identity.KeyUnknown},
		{"key of a plan of two APIs", "api-ours", "prod", "shared", identity.KeyKnown},
		{"key never issued", "api-ours", "prod", "nope", identity.KeyUnknown},
		{"API without plans", "api-unknown", "prod", "ours-1", identity.KeyUnknown},
		{"key of our plan on a stage it has no plan for", "api-ours", "dev", "ours-1", identity.KeyUnknown},
		{"prod-only key on prod", "api-staged", "prod", "prod-only", identity.KeyKnown},
		{"prod-only key on dev", "api-staged", "dev", "prod-only", identity.KeyUnknown},
		{"dev-only key on dev", "api-staged", "dev", "dev-only", identity.KeyKnown},
		{"dev-only key on prod", "api-staged", "prod", "dev-only", identity.KeyUnknown},
		{"dev-only key on the dev stage of another API of its plan", "api-theirs", "dev", "dev-only", identity.KeyKnown},
		{"key of both stages' plans on prod", "api-staged", "prod", "both-stages", identity.KeyKnown},
		{"key of both stages' plans on dev", "api-staged", "dev", "both-stages", identity.KeyKnown},
		{"key of a plan of a stage, on a stage of no plan", "api-staged", "test", "both-stages", identity.KeyUnknown},
		{"no stage: keys of every stage of the API", "api-staged", "", "dev-only", identity.KeyKnown},
		{"no stage: still only this API's", "api-staged", "", "ours-1", identity.KeyUnknown},
		{"no API id: every enabled key of the account", "", "", "theirs", identity.KeyKnown},
		{"no API id: disabled keys still unknown", "", "", "ours-disabled", identity.KeyUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := keys.Lookup(context.Background(), tc.apiID, tc.stage, keyHash(tc.key)); got != tc.want {
				t.Errorf("Lookup(%q, %q, %q) = %v, want %v", tc.apiID, tc.stage, tc.key, got, tc.want)
			}
		})
	}
	if err := keys.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, warning := range []string{"request without an API id", "request without a stage"} {
		if n := strings.Count(logs.String(), warning); n != 1 {
			t.Errorf("%q was logged %d times, want once:\n%s", warning, n, logs.String())
		}
	}
	for _, v := range []string{"ours-1", "theirs", "shared", "dev-only"} {
		if strings.Contains(logs.String(), v) {
			t.Errorf("the log holds the key %q", v)
		}
	}
}

// TestGatewayKeysRefresh pins when the keys are listed again: once the
// interval (5m) plus its jitter (up to 30 s) has passed, on any lookup; as
// soon as the interval has passed, on an unknown key not seen since the
// last listing; never more often than once per interval otherwise; and,
// after failed listings, after 30 s, then 60 s. Each listing runs in the
// background, the lookup that started it answered from the list it had.
func TestGatewayKeysRefresh(t *testing.T) {
	srv, api := newGatewayServer(t,
		[]gwKey{{"k1", "a", true}, {"k2", "b", true}, {"k3", "c", true}},
		[]gwPlan{{id: "p1", stages: []string{"api"}, keyIDs: []string{"k1", "k2", "k3"}}})
	clk := newClock()
	const refresh = 5 * time.Minute
	keys := identity.NewGatewayKeys(api, refresh, clk.Now, nil)
	ctx := context.Background()
	if err := keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	const pastJitter = refresh/10 + time.Second

	steps := []struct {
		name         string
		advance      time.Duration
		attachKey    string
		fail         bool // the API fails GetUsagePlanKeys during the step
		lookup       string
		want         identity.KeyStatus
		wantListings int64 // cumulative, the cold-start one included
	}{
		{"known key: no listing", time.Second, "", false, "a", identity.KeyKnown, 1},
		{"unknown key within the interval: no listing", time.Second, "", false, "zzz", identity.KeyUnknown, 1},
		{"new key 30 s later: refused, no listing", 30 * time.Second, "d", false, "d", identity.KeyUnknown, 1},
		{"another new unknown key 4 min later: no listing", 4 * time.Minute, "", false, "yyy", identity.KeyUnknown, 1},
		{"an unknown key seen before, at the interval: no listing", refresh - 4*time.Minute - 32*time.Second, "", false, "d", identity.KeyUnknown, 1},
		{"a new unknown key at the interval: one listing", 0, "", false, "xxx", identity.KeyUnknown, 2},
		{"the new key once that listing ended", time.Second, "", false, "d", identity.KeyKnown, 2},
		{"another new unknown key right after: no listing", time.Second, "", false, "www", identity.KeyUnknown, 2},
		{"stale list: answered from it, listed again", refresh + pastJitter, "", false, "a", identity.KeyKnown, 3},
		{"a failed listing keeps the list", refresh + pastJitter, "", true, "b", identity.KeyKnown, 4},
		{"and is not retried within 30 s", 29 * time.Second, "", false, "vvv", identity.KeyUnknown, 4},
		{"but after 30 s and its jitter", time.Second + 3*time.Second + time.Millisecond, "", true, "c", identity.KeyKnown, 5},
		{"a second failure waits 60 s", 59 * time.Second, "", false, "uuu", identity.KeyUnknown, 5},
		{"then lists", time.Second + 6*time.Second + time.Millisecond, "", false, "c", identity.KeyKnown, 6},
		{"and the interval is back", refresh - time.Second, "", false, "ttt", identity.KeyUnknown, 6},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		if s.attachKey != "" {
			srv.attach("p1", "id-"+s.attachKey, s.attachKey)
		}
		srv.setFailPlanKeys(s.fail)
		before := srv.Listings()
		if got := keys.Lookup(ctx, "api", "prod", keyHash(s.lookup)); got != s.want {
			t.Errorf("%s: Lookup = %v, want %v", s.name, got, s.want)
		}
		err := keys.Wait(ctx)
		listed := srv.Listings() > before
		if wantErr := s.fail && listed; (err != nil) != wantErr {
			t.Errorf("%s: listing error %v, want failure %v", s.name, err, wantErr)
		}
		if got := srv.Listings(); got != s.wantListings {
			t.Errorf("%s: %d listings so far, want %d", s.name, got, s.wantListings)
		}
	}
}

// sprayPlans is an account with n usage plans of the API "api" (stage
// prod), one key each.
func sprayPlans(n int) ([]gwKey, []gwPlan) {
	var keys []gwKey
	var plans []gwPlan
	for i := range n {
		id := "k" + strconv.Itoa(i)
		keys = append(keys, gwKey{id, "key-" + strconv.Itoa(i), true})
		plans = append(plans, gwPlan{id: "p" + strconv.Itoa(i), stages: []string{"api"}, keyIDs: []string{id}})
	}
	return keys, plans
}

// TestGatewayKeysUnknownKeySpray: distinct unknown keys, one every 60 ms
// for ten simulated minutes, on an account of 52 usage plans, cost at most
// one listing per refresh interval (the cold-start one included):
// ceil(10m/interval)+1 listings of 2+52 calls each (pages of 500).
func TestGatewayKeysUnknownKeySpray(t *testing.T) {
	const plans = 52
	cases := []struct {
		refresh time.Duration
		keys    int
	}{
		{5 * time.Minute, 10_000},
		{time.Minute, 10_000},
		{time.Minute, 3 * identity.MaxUnknownKeys}, // the negative cache overflows
		{10 * time.Second, 10_000},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%v, %d keys", tc.refresh, tc.keys), func(t *testing.T) {
			gwKeys, gwPlans := sprayPlans(plans)
			srv, api := newGatewayServer(t, gwKeys, gwPlans)
			srv.honourLimit()
			clk := newClock()
			keys := identity.NewGatewayKeys(api, tc.refresh, clk.Now, nil)
			ctx := context.Background()
			if err := keys.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			const span = 10 * time.Minute
			step := span / time.Duration(tc.keys)
			for i := range tc.keys {
				// Every tenth request repeats an unknown key, every
				// hundredth presents a known one.
				key := "unknown-" + strconv.Itoa(i)
				switch {
				case i%100 == 0:
					key = "key-7"
				case i%10 == 0:
					key = "unknown-" + strconv.Itoa(i/2)
				}
				got := keys.Lookup(ctx, "api", "prod", keyHash(key))
				if want := identity.KeyUnknown; key == "key-7" {
					if got != identity.KeyKnown {
						t.Fatalf("known key at request %d: %v", i, got)
					}
				} else if got != want {
					t.Fatalf("unknown key %q: %v", key, got)
				}
				if err := keys.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				clk.Advance(step)
			}
			maxListings := int64((span+tc.refresh-1)/tc.refresh) + 1
			perListing := int64(2 + plans)
			listings, calls := srv.Listings(), srv.Calls("")
			t.Logf("refresh %v: %d listings, %d management calls in 10 minutes (%d a listing)", tc.refresh, listings, calls, perListing)
			if listings > maxListings {
				t.Errorf("%d listings in 10 minutes, want at most %d", listings, maxListings)
			}
			if calls > maxListings*perListing {
				t.Errorf("%d management calls in 10 minutes, want at most %d", calls, maxListings*perListing)
			}
		})
	}
}

// TestGatewayKeysChangesAtNextListing: a key created in API Gateway is
// refused until the next listing and known after it; a revoked key is
// known until the next listing and refused after it; neither change brings
// the listing forward.
func TestGatewayKeysChangesAtNextListing(t *testing.T) {
	srv, api := newGatewayServer(t,
		[]gwKey{{"k1", "old", true}, {"k2", "other", true}},
		[]gwPlan{{id: "p1", stages: []string{"api"}, keyIDs: []string{"k1", "k2"}}})
	clk := newClock()
	const refresh = time.Minute
	keys := identity.NewGatewayKeys(api, refresh, clk.Now, nil)
	ctx := context.Background()
	if err := keys.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	lookup := func(key string) identity.KeyStatus {
		t.Helper()
		got := keys.Lookup(ctx, "api", "prod", keyHash(key))
		if err := keys.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		return got
	}

	clk.Advance(10 * time.Second)
	srv.attach("p1", "k3", "new")
	srv.revoke("k1")
	for range 50 {
		clk.Advance(time.Second)
		if got := lookup("new"); got != identity.KeyUnknown {
			t.Fatalf("created key before the next listing: %v, want KeyUnknown", got)
		}
		if got := lookup("old"); got != identity.KeyKnown {
			t.Fatalf("revoked key before the next listing: %v, want KeyKnown", got)
		}
	}
	if n := srv.Listings(); n != 1 {
		t.Fatalf("%d listings within the interval, want the cold-start one", n)
	}
	clk.Advance(refresh/10 + time.Second) // past the interval and its jitter
	lookup("other")
	if n := srv.Listings(); n != 2 {
		t.Fatalf("%d listings past the interval, want 2", n)
	}
	if got := lookup("new"); got != identity.KeyKnown {
		t.Errorf("created key after the next listing: %v, want KeyKnown", got)
	}
	if got := lookup("old"); got != identity.KeyUnknown {
		t.Errorf("revoked key after the next listing: %v, want KeyUnknown", got)
	}
}

// TestGatewayKeysNeverWait: no lookup waits for a listing, at cold start
// or later; a listing in flight serves the previous list, and concurrent
// triggers share one listing.
func TestGatewayKeysNeverWait(t *testing.T) {
	srv, api := newGatewayServer(t,
		[]gwKey{{"k1", "a", true}},
		[]gwPlan{{id: "p1", stages: []string{"api"}, keyIDs: []string{"k1"}}})
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
		if got := keys.Lookup(ctx, "api", "prod", keyHash(key)); got != identity.KeyUnverifiable {
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
	if got := keys.Lookup(ctx, "api", "prod", keyHash("a")); got != identity.KeyKnown {
		t.Fatalf("Lookup after the first listing = %v", got)
	}

	// A stale list (past the interval and its jitter), then a listing
	// that hangs.
	release = srv.Hold()
	defer release()
	clk.Advance(6 * time.Minute)
	srv.attach("p1", "k2", "b")
	if got := keys.Lookup(ctx, "api", "prod", keyHash("a")); got != identity.KeyKnown {
		t.Errorf("known key on a stale list = %v, want KeyKnown", got)
	}
	srv.Entered()
	for _, tc := range []struct {
		key  string
		want identity.KeyStatus
	}{{"a", identity.KeyKnown}, {"b", identity.KeyUnknown}, {"zzz", identity.KeyUnknown}} {
		if got := keys.Lookup(ctx, "api", "prod", keyHash(tc.key)); got != tc.want {
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
	if got := keys.Lookup(ctx, "api", "prod", keyHash("b")); got != identity.KeyKnown {
		t.Errorf("key attached during the stale period, after the listing = %v, want KeyKnown", got)
	}
	if got := srv.Listings(); got != 2 {
		t.Errorf("%d listings, want 2", got)
	}
}

// TestGatewayKeysUnreachable: a list that was never read leaves keys
// unverifiable (the caller is counted as anonymous, not refused), and a
// failing API is asked again at most once per interval.
func TestGatewayKeysUnreachable(t *testing.T) {
	srv, api := newGatewayServer(t, []gwKey{{"k1", "k", true}}, []gwPlan{{id: "p1", stages: []string{"api"}, keyIDs: []string{"k1"}}})
	srv.Fail(func(string) *mototest.Fault {
		return &mototest.Fault{Status: http.StatusBadRequest, Type: "BadRequestException", Message: "boom"}
	})
	keys := identity.NewGatewayKeys(api, time.Minute, newClock().Now, nil)
	ctx := context.Background()
	if err := keys.Refresh(ctx); err == nil {
		t.Fatal("Refresh against a failing API succeeded")
	}
	for i := 0; i < 3; i++ {
		if got := keys.Lookup(ctx, "api", "prod", keyHash("k")); got != identity.KeyUnverifiable {
			t.Errorf("Lookup = %v, want KeyUnverifiable", got)
		}
		if err := keys.Wait(ctx); err != nil {
			t.Errorf("a listing ran within the retry interval: %v", err)
		}
	}
	if got := srv.Calls(""); got != 1 {
		t.Errorf("%d API calls, want the cold-start one only", got)
	}
}

// TestGatewayKeyPlans: a key's plan is its usage plan's slidegate:plan tag,
// else the usage plan's name when that is a plan name, on the stages of
// that usage plan only.
func TestGatewayKeyPlans(t *testing.T) {
	_, api := newGatewayServer(t,
		[]gwKey{{"k1", "tagged", true}, {"k2", "named", true}, {"k3", "unnamed", true}, {"k4", "bad-tag", true}},
		[]gwPlan{
			{id: "p1", stages: []string{"api/prod"}, keyIDs: []string{"k1"}, name: "Pro Monthly", tags: map[string]string{"slidegate:plan": "Pro"}},
			{id: "p2", stages: []string{"api/prod"}, keyIDs: []string{"k2"}, name: "Free"},
			{id: "p3", stages: []string{"api/prod"}, keyIDs: []string{"k3"}, name: "Legacy plan 2019"},
			{id: "p4", stages: []string{"api/prod"}, keyIDs: []string{"k4"}, name: "enterprise", tags: map[string]string{"slidegate:plan": "not a plan"}},
			{id: "p5", stages: []string{"api/dev"}, keyIDs: []string{"k1"}, name: "trial"},
		})
	keys := identity.NewGatewayKeys(api, 5*time.Minute, newClock().Now, nil)
	if err := keys.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ apiID, stage, key, want string }{
		{"api", "prod", "tagged", "pro"},
		{"api", "dev", "tagged", "trial"},
		{"api", "prod", "named", "free"},
		{"api", "prod", "unnamed", ""},
		{"api", "prod", "bad-tag", "enterprise"},
		{"api", "", "tagged", ""},
		{"other", "prod", "tagged", ""},
	} {
		if got := keys.KeyPlan(context.Background(), c.apiID, c.stage, keyHash(c.key)); got != c.want {
			t.Errorf("KeyPlan(%q, %q, %q) = %q, want %q", c.apiID, c.stage, c.key, got, c.want)
		}
	}
	r := identity.NewResolver(keys, nil, nil)
	res := r.ResolveForAPI(context.Background(), "api", "prod", map[string]string{"x-api-key": apiKeyValue("tagged")}, "192.0.2.1", 64)
	if res.Caller.Tier != identity.TierOrg || res.Caller.Plan != "pro" {
		t.Errorf("resolved %+v, want org with plan pro", res.Caller)
	}
}
