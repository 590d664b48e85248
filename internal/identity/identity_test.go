package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/testkit"
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwksServer serves a JWKS and counts fetches.
type jwksServer struct {
	mu      sync.Mutex
	doc     []byte
	fetches atomic.Int64
}

func (s *jwksServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.fetches.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = w.Write(s.doc)
}

func TestVerifier(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecPub, err := ecKey.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	jwks := &jwksServer{}
	setKeys := func(withEC bool) {
		keys := []map[string]string{{"kty": "RSA", "kid": "rsa-1", "use": "sig", "n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())}}
		if withEC {
			keys = append(keys, map[string]string{"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": b64(ecPub[1:33]), "y": b64(ecPub[33:])})
		}
		doc, _ := json.Marshal(map[string]any{"keys": keys})
		jwks.mu.Lock()
		jwks.doc = doc
		jwks.mu.Unlock()
	}
	setKeys(false)
	hs := httptest.NewServer(jwks)
	defer hs.Close()

	hsSecret := []byte("hs256-secret-for-tests-0123456789")
	clk := testkit.NewClock(time.Now())
	v := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", HS256Secret: hsSecret, JWKSURL: hs.URL, Now: clk.Now})
	if err := v.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "iss", "aud": "aud", "sub": "alice", "exp": now.Add(time.Hour).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	sign := func(m jwt.SigningMethod, kid string, c jwt.MapClaims, key any) string {
		tok := jwt.NewWithClaims(m, c)
		if kid != "" {
			tok.Header["kid"] = kid
		}
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rsaPubPEMAsHMAC := rsaKey.N.Bytes() // alg confusion attempt: HS256 keyed with public material

	cases := []struct {
		name  string
		token string
		ok    bool
	}{
		{"HS256 with the secret", sign(jwt.SigningMethodHS256, "", claims(nil), hsSecret), true},
		{"RS256 with a JWKS key", sign(jwt.SigningMethodRS256, "rsa-1", claims(nil), rsaKey), true},
		{"HS256 with another secret", sign(jwt.SigningMethodHS256, "", claims(nil), []byte("nope")), false},
		{"HS256 keyed with the RSA public key (alg confusion)", sign(jwt.SigningMethodHS256, "rsa-1", claims(nil), rsaPubPEMAsHMAC), false},
		{"wrong issuer", sign(jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["iss"] = "evil" }), hsSecret), false},
		{"wrong audience", sign(jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["aud"] = "other" }), hsSecret), false},
		{"expired", sign(jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() }), hsSecret), false},
		{"no exp", sign(jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { delete(c, "exp") }), hsSecret), false},
		{"no sub", sign(jwt.SigningMethodHS256, "", claims(func(c jwt.MapClaims) { delete(c, "sub") }), hsSecret), false},
		{"alg none", func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
			return s
		}(), false},
		{"garbage", "not.a.token", false},
		{"huge", strings.Repeat("a", 10000), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := v.Verify(context.Background(), tc.token)
			if (err == nil) != tc.ok {
				t.Fatalf("Verify: sub %q err %v, want ok=%v", sub, err, tc.ok)
			}
			if err == nil && sub != "alice" {
				t.Errorf("sub = %q", sub)
			}
			if err != nil && strings.Contains(err.Error(), tc.token) {
				t.Error("the error quotes the token")
			}
		})
	}

	t.Run("a new kid is fetched once, in the background, then unknown kids wait for the interval", func(t *testing.T) {
		setKeys(true)
		before := jwks.fetches.Load()
		// The last fetch (Prefetch) was under JWKSRefetchInterval ago: the
		// rotated-in key is not fetched yet, and forged kids cost nothing.
		for i := 0; i < 5; i++ {
			if _, err := v.Verify(context.Background(), sign(jwt.SigningMethodES256, "forged-kid", claims(nil), ecKey)); err == nil {
				t.Fatal("a token with an unknown kid verified")
			}
		}
		if err := v.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := jwks.fetches.Load() - before; got != 0 {
			t.Errorf("%d JWKS fetches within the refetch interval, want 0", got)
		}
		// After the interval, the first token naming the new kid is refused
		// (the set it is checked against is the one already fetched) and
		// starts one fetch; once that has ended, the kid verifies with no
		// further fetch.
		clk.Advance(identity.JWKSRefetchInterval)
		if _, err := v.Verify(context.Background(), sign(jwt.SigningMethodES256, "ec-1", claims(nil), ecKey)); err == nil {
			t.Fatal("the first token with the rotated-in kid verified before the JWKS was fetched again")
		}
		if err := v.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if sub, err := v.Verify(context.Background(), sign(jwt.SigningMethodES256, "ec-1", claims(nil), ecKey)); err != nil || sub != "alice" {
				t.Fatalf("ES256 token with the rotated-in kid: %q, %v", sub, err)
			}
		}
		if err := v.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := jwks.fetches.Load() - before; got != 1 {
			t.Errorf("%d JWKS fetches for the rotated-in key, want 1", got)
		}
	})
}

// TestVerifierNeverWaitsForJWKS: tokens are checked against the keys
// already fetched; a fetch in flight (at cold start or for an unknown kid)
// never holds a Verify up.
func TestVerifierNeverWaitsForJWKS(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "rsa-1", "n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())}}})
	gate := newHoldGate()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gate.Pass(r) {
			_, _ = w.Write(doc)
		}
	}))
	defer hs.Close()
	clk := testkit.NewClock(time.Now())
	v := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", JWKSURL: hs.URL, Now: clk.Now})
	unsigned := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": "iss", "aud": "aud", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	unsigned.Header["kid"] = "rsa-1"
	tok, err := unsigned.SignedString(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	release := gate.Hold()
	defer release()
	expired, cancel := context.WithCancel(ctx)
	cancel()
	if err := v.Prefetch(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("Prefetch past its deadline = %v, want context.Canceled", err)
	}
	gate.Entered()
	for i := 0; i < 3; i++ {
		if _, err := v.Verify(ctx, tok); err == nil {
			t.Fatal("a token verified before the JWKS was fetched")
		}
	}
	if gate.Held() != 1 {
		t.Fatalf("%d fetches held after the Verify calls, want the cold-start one: a Verify waited or fetched again", gate.Held())
	}
	release()
	if err := v.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if sub, err := v.Verify(ctx, tok); err != nil || sub != "alice" {
		t.Fatalf("after the fetch: %q, %v", sub, err)
	}
}

// TestVerifierHS256SecretPending: HS256 tokens are refused until the secret
// being read arrives, and verify from then on.
func TestVerifierHS256SecretPending(t *testing.T) {
	v := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", HS256SecretPending: true})
	if v == nil {
		t.Fatal("no verifier for a pending HS256 secret: tokens would be ignored instead of refused")
	}
	secret := []byte("arrives-later-and-is-32-bytes-long")
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "iss", "aud": "aud", "sub": "bob", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	if _, err := v.Verify(context.Background(), tok); err == nil {
		t.Fatal("an HS256 token verified before the secret arrived")
	}
	v.SetHS256Secret(secret)
	if sub, err := v.Verify(context.Background(), tok); err != nil || sub != "bob" {
		t.Fatalf("after SetHS256Secret: %q, %v", sub, err)
	}
}

func TestResolverOrder(t *testing.T) {
	secret := []byte("resolver-order-hs256-secret-0123456789")
	v := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", HS256Secret: secret})
	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "iss", "aud": "aud", "sub": "bob", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	keys := identity.StaticKeys{identity.KeyHash("good"): {}}
	r := identity.NewResolver(keys, v, nil)
	noJWT := identity.NewResolver(keys, nil, nil)
	cases := []struct {
		name         string
		r            *identity.Resolver
		headers      map[string]string
		wantIdentity string
		unauthorized bool
	}{
		{"no credentials", r, nil, "ip:192.0.2.1", false},
		{"known key", r, map[string]string{"x-api-key": "good"}, "key:" + identity.KeyHash("good"), false},
		{"unknown key beats a valid token", r, map[string]string{"x-api-key": "bad", "authorization": "Bearer " + tok}, "ip:192.0.2.1", true},
		{"valid token", r, map[string]string{"authorization": "bearer " + tok}, "sub:bob", false},
		{"bad token", r, map[string]string{"authorization": "Bearer x.y.z"}, "ip:192.0.2.1", true},
		{"token without JWT configuration earns nothing", noJWT, map[string]string{"authorization": "Bearer " + tok}, "ip:192.0.2.1", false},
		{"basic auth is not a bearer", r, map[string]string{"authorization": "Basic Zm9vOmJhcg=="}, "ip:192.0.2.1", false},
		{"X-Forwarded-For is ignored", r, map[string]string{"x-forwarded-for": "10.9.9.9"}, "ip:192.0.2.1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.r.Resolve(context.Background(), tc.headers, "192.0.2.1")
			if got.Caller.Identity != tc.wantIdentity || got.Unauthorized != tc.unauthorized {
				t.Errorf("got %q unauthorized=%v, want %q unauthorized=%v", got.Caller.Identity, got.Unauthorized, tc.wantIdentity, tc.unauthorized)
			}
		})
	}
}

// TestResolverPlans: an org caller's plan comes from API_KEY_HASHES
// "hash:plan", a user's from the token's plan claim (plain or namespaced);
// a plan claim that is not a plan name gives no plan, and never fails the
// token.
func TestResolverPlans(t *testing.T) {
	secret := []byte("resolver-plans-hs256-secret-0123456789")
	sign := func(claims jwt.MapClaims) string {
		claims["iss"], claims["aud"], claims["sub"], claims["exp"] = "iss", "aud", "bob", time.Now().Add(time.Hour).Unix()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	keys := identity.StaticKeyPlans{
		StaticKeys: identity.StaticKeys{identity.KeyHash("pro-key"): {}, identity.KeyHash("plain-key"): {}},
		Plans:      map[string]string{identity.KeyHash("pro-key"): "pro"},
	}
	plain := identity.NewResolver(keys, identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", HS256Secret: secret, PlanClaim: "plan"}), nil)
	namespaced := identity.NewResolver(keys, identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", HS256Secret: secret, PlanClaim: "https://example.com/plan"}), nil)
	cases := []struct {
		name     string
		r        *identity.Resolver
		headers  map[string]string
		wantTier string
		wantPlan string
	}{
		{"key with a plan", plain, map[string]string{"x-api-key": "pro-key"}, identity.TierOrg, "pro"},
		{"key without a plan", plain, map[string]string{"x-api-key": "plain-key"}, identity.TierOrg, ""},
		{"token with a plan", plain, map[string]string{"authorization": "Bearer " + sign(jwt.MapClaims{"plan": "Pro"})}, identity.TierUser, "pro"},
		{"token without a plan", plain, map[string]string{"authorization": "Bearer " + sign(jwt.MapClaims{})}, identity.TierUser, ""},
		{"plan claim not a string", plain, map[string]string{"authorization": "Bearer " + sign(jwt.MapClaims{"plan": []string{"pro"}})}, identity.TierUser, ""},
		{"plan claim not a plan name", plain, map[string]string{"authorization": "Bearer " + sign(jwt.MapClaims{"plan": "pro plan!"})}, identity.TierUser, ""},
		{"namespaced claim", namespaced, map[string]string{"authorization": "Bearer " + sign(jwt.MapClaims{"https://example.com/plan": "enterprise", "plan": "free"})}, identity.TierUser, "enterprise"},
		{"anonymous has no plan", plain, nil, identity.TierAnonymous, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.r.Resolve(context.Background(), tc.headers, "192.0.2.1")
			if got.Caller.Tier != tc.wantTier || got.Caller.Plan != tc.wantPlan || got.Unauthorized {
				t.Errorf("got %+v unauthorized=%v, want tier %s plan %q", got.Caller, got.Unauthorized, tc.wantTier, tc.wantPlan)
			}
		})
	}
}

func TestNormalizePlan(t *testing.T) {
	for in, want := range map[string]string{"pro": "pro", " Pro_2 ": "pro_2", "": "", "pro-x": "", "p\u00e9": "", strings.Repeat("a", 65): ""} {
		got, ok := identity.NormalizePlan(in)
		if got != want || ok != (want != "") {
			t.Errorf("NormalizePlan(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
