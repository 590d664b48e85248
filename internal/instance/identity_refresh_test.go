package instance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestIdentityKeysOfThisAPIOnly: through the real SDK against the local API
// Gateway endpoint, an API key is an org key on the API stages whose usage
// plans it is attached to, and only there; disabled keys and keys of no
// plan are unauthorized everywhere.
func TestIdentityKeysOfThisAPIOnly(t *testing.T) {
	gw, _ := mototest.NewGateway(t, mototest.ExampleKeys(), mototest.ExampleUsagePlans())
	keys := identity.NewGatewayKeys(gw.Client(), time.Minute, nil, nil)
	if err := keys.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	resolver := identity.NewResolver(keys, nil, nil)
	const ours, theirs = "a1b2c3d4e5", "zzzzzzzzzz"
	cases := []struct {
		name, apiID, stage, key string
		wantOrg                 bool
	}{
		{"our key on our API", ours, "prod", "gw-key-page-1-a-padded", true},
		{"a key of a plan of both APIs, on ours", ours, "prod", "gw-key-page-3-padded", true},
		{"another API's key on ours", ours, "prod", "gw-key-of-another-api-padded", false},
		{"that key on its own API", theirs, "prod", "gw-key-of-another-api-padded", true},
		{"our key on the other API", theirs, "prod", "gw-key-page-1-a-padded", false},
		{"a key of a plan of both APIs, on theirs", theirs, "prod", "gw-key-page-3-padded", true},
		{"enabled key of no plan", ours, "prod", "gw-key-in-no-plan-padded", false},
		{"disabled key of our plan", ours, "prod", "gw-key-disabled-padded", false},
		{"our prod key on our dev stage", ours, "dev", "gw-key-page-1-a-padded", false},
		{"our dev key on our dev stage", ours, "dev", "gw-key-dev-only-padded", true},
		{"our dev key on our prod stage", ours, "prod", "gw-key-dev-only-padded", false},
		{"our dev key on the other API's dev stage", theirs, "dev", "gw-key-dev-only-padded", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := resolver.ResolveForAPI(context.Background(), tc.apiID, tc.stage, map[string]string{"x-api-key": tc.key}, "192.0.2.1", identity.DefaultIPv6Prefix)
			if tc.wantOrg {
				if got.Caller.Tier != identity.TierOrg || got.Unauthorized || got.Caller.APIKey != tc.key {
					t.Errorf("got %+v, want an org caller", got)
				}
				return
			}
			if got.Caller.Tier != identity.TierAnonymous || !got.Unauthorized || got.Caller.Identity != "ip:192.0.2.1" {
				t.Errorf("got %+v, want unauthorized, counted against the source IP", got)
			}
		})
	}
}

// idEnv is the environment of the runtimes of the identity tests: generous
// limits, API keys from API Gateway, RS256 tokens from jwksURL.
func idEnv(redisURL, jwksURL string) map[string]string {
	return map[string]string{
		"REDIS_URL":            redisURL,
		"REDIS_TIMEOUT":        "100ms",
		"RATE_LIMIT_ANONYMOUS": "1000/1m",
		"RATE_LIMIT_USER":      "1000/1m",
		"RATE_LIMIT_ORG":       "1000/1m",
		"JWT_ISSUER":           idIssuer,
		"JWT_AUDIENCE":         idAudience,
		"JWT_JWKS_URL":         jwksURL,
		"API_KEYS_REFRESH":     "1m",
	}
}

func idToken(t testing.TB, j *idJWKS, sub string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": idIssuer, "aud": idAudience, "sub": sub, "exp": time.Now().Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = j.kid
	s, err := tok.SignedString(j.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func idDecide(t testing.TB, rt *instance.Runtime, headers map[string]string) apigw.Outcome {
	t.Helper()
	o, err := rt.Decide(context.Background(), apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.7", Headers: headers})
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return o
}

// TestIdentityColdStartBudget: with API Gateway and the JWKS host hanging,
// NewRuntime still returns within its cold-start budget, decisions are
// answered at once (an API key counts as anonymous, neither trusted nor
// refused; a token does not verify), and the loads that outlived the
// budget finish in the background.
func TestIdentityColdStartBudget(t *testing.T) {
	srv := redistest.StartServer(t)
	gw, _ := mototest.NewGateway(t, mototest.ExampleKeys(), mototest.ExampleUsagePlans())
	jwks := startIDJWKS(t)
	releaseGateway, releaseJWKS := gw.Gate.Hold(), jwks.gate.Hold()
	defer releaseGateway()
	defer releaseJWKS()

	rt, logs := idRuntime(t, idEnv(srv.URL(), jwks.url), instance.Options{
		APIGateway:      gw.Client(),
		ColdStartBudget: 50 * time.Millisecond,
	})
	gw.Gate.Entered()
	jwks.gate.Entered()

	key := map[string]string{"x-api-key": "gw-key-page-1-a-padded"}
	bearer := map[string]string{"authorization": "Bearer " + idToken(t, jwks, "alice")}
	if o := idDecide(t, rt, key); o.Caller.Tier != identity.TierAnonymous || o.Unauthorized() || !o.Result.Allowed {
		t.Errorf("API key while the keys load: %+v, want anonymous, not unauthorized", o)
	}
	if o := idDecide(t, rt, bearer); o.Caller.Tier != identity.TierAnonymous || !o.Unauthorized() {
		t.Errorf("token while the JWKS loads: %+v, want unauthorized", o)
	}
	if gw.Gate.Held() != 1 || jwks.gate.Held() != 1 {
		t.Fatalf("held: API Gateway %d, JWKS %d; want 1 each: NewRuntime or a decision waited for them", gw.Gate.Held(), jwks.gate.Held())
	}
	if !strings.Contains(logs.String(), "cold-start budget spent") {
		t.Errorf("the spent budget is not logged:\n%s", logs.String())
	}

	releaseGateway()
	releaseJWKS()
	if err := rt.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := idDecide(t, rt, key); o.Caller.Tier != identity.TierOrg || o.Caller.APIKey != "gw-key-page-1-a-padded" {
		t.Errorf("API key once the keys are listed: %+v, want org", o)
	}
	if o := idDecide(t, rt, bearer); o.Caller.Tier != identity.TierUser || o.Unauthorized() {
		t.Errorf("token once the JWKS is fetched: %+v, want user", o)
	}
}

// TestIdentityKeyRefreshInBackground: a stale key list and an unknown key
// start a listing in the background; while it hangs, decisions are
// answered at once from the list already read (known keys stay org, a key
// created since is refused), and once it ends the new key is org.
func TestIdentityKeyRefreshInBackground(t *testing.T) {
	srv := redistest.StartServer(t)
	gw, _ := mototest.NewGateway(t, mototest.ExampleKeys(), mototest.ExampleUsagePlans())
	jwks := startIDJWKS(t)
	clock := testkit.NewClock(time.Unix(1_800_000_000, 0))
	rt, _ := idRuntime(t, idEnv(srv.URL(), jwks.url), instance.Options{APIGateway: gw.Client(), Now: clock.Now})
	known := map[string]string{"x-api-key": "gw-key-page-1-a-padded"}
	created := map[string]string{"x-api-key": "gw-key-created-later-padded"}
	if o := idDecide(t, rt, known); o.Caller.Tier != identity.TierOrg {
		t.Fatalf("known key after cold start: %+v", o)
	}

	gw.AddKey(mototest.APIKey{ID: "k8", Name: "eight", Value: "gw-key-created-later-padded", Enabled: true}, 1)
	release := gw.Gate.Hold()
	defer release()
	clock.Advance(time.Minute + 7*time.Second) // API_KEYS_REFRESH and its jitter (up to a tenth): the list is stale

	if o := idDecide(t, rt, known); o.Caller.Tier != identity.TierOrg {
		t.Errorf("known key on a stale list: %+v, want org", o)
	}
	gw.Gate.Entered()
	if o := idDecide(t, rt, created); !o.Unauthorized() {
		t.Errorf("key created since the last listing, while the next hangs: %+v, want unauthorized", o)
	}
	if o := idDecide(t, rt, known); o.Caller.Tier != identity.TierOrg {
		t.Errorf("known key while a listing hangs: %+v, want org", o)
	}
	if gw.Gate.Held() != 1 {
		t.Fatalf("%d API Gateway requests held, want 1: a decision waited, or a second listing started", gw.Gate.Held())
	}

	release()
	if err := rt.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o := idDecide(t, rt, created); o.Caller.Tier != identity.TierOrg {
		t.Errorf("key created since, after the listing: %+v, want org", o)
	}
}

// TestIdentityUnknownKeysListAtMostOncePerInterval: a runtime deciding
// 3,000 requests with distinct unknown API keys over five simulated minutes
// (API_KEYS_REFRESH 1m) lists the API Gateway keys at most once per
// interval, the cold-start listing included, and answers every one of them
// unauthorized; a key created meanwhile is an org key after the next
// listing.
func TestIdentityUnknownKeysListAtMostOncePerInterval(t *testing.T) {
	srv := redistest.StartServer(t)
	gw, _ := mototest.NewGateway(t, mototest.ExampleKeys(), mototest.ExampleUsagePlans())
	jwks := startIDJWKS(t)
	clock := testkit.NewClock(time.Unix(1_800_000_000, 0))
	env := idEnv(srv.URL(), jwks.url)
	env["RATE_LIMIT_ANONYMOUS"] = "100000/1m"
	rt, _ := idRuntime(t, env, instance.Options{APIGateway: gw.Client(), Now: clock.Now})
	if err := rt.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	decide := func(key string) apigw.Outcome {
		t.Helper()
		o, err := rt.Decide(context.Background(), apigw.Request{
			Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.7",
			APIID: "a1b2c3d4e5", Stage: "prod", Headers: map[string]string{"x-api-key": key},
		})
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		return o
	}
	listings := func() int {
		n := 0
		for _, r := range gw.RequestsTo("/apikeys") {
			if r.URL.Query().Get("position") == "" {
				n++
			}
		}
		return n
	}

	const span, requests = 5 * time.Minute, 3000
	for i := range requests {
		if i == requests/2 {
			gw.AddKey(mototest.APIKey{ID: "k10", Name: "ten", Value: "gw-key-created-later-padded", Enabled: true}, 1)
		}
		if o := decide(fmt.Sprintf("spray-%d", i)); !o.Unauthorized() {
			t.Fatalf("unknown key %d: %+v, want unauthorized", i, o)
		}
		if err := rt.WaitLoaded(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(span / requests)
	}
	if n, most := listings(), int(span/time.Minute)+1; n > most {
		t.Errorf("%d listings in %v of unknown keys with API_KEYS_REFRESH 1m, want at most %d", n, span, most)
	}
	if o := decide("gw-key-created-later-padded"); o.Caller.Tier != identity.TierOrg {
		t.Errorf("key created during the spray, after the next listing: %+v, want org", o)
	}
}
