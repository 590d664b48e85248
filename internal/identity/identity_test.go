package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/internal/identity"
)

// apiKeysServer answers GET /apikeys like API Gateway, one key a page.
type apiKeysServer struct {
	mu    sync.Mutex
	keys  []string
	calls atomic.Int64
}

func (s *apiKeysServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	if p := r.URL.Query().Get("position"); p != "" {
		i = int(p[0] - '0')
	}
	out := map[string]any{"item": []map[string]any{}}
	if i < len(s.keys) {
		out["item"] = []map[string]any{{"id": "id", "value": s.keys[i], "enabled": true}}
	}
	if i+1 < len(s.keys) {
		out["position"] = string(rune('0' + i + 1))
	}
	_ = json.NewEncoder(w).Encode(out)
}

func sdkClient(url string) *apigateway.Client {
	return apigateway.New(apigateway.Options{
		BaseEndpoint: aws.String(url),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// TestGatewayKeysRefresh pins when the key list is read again: on a stale
// list, and on an unknown key at most once per UnknownKeyRefreshInterval.
func TestGatewayKeysRefresh(t *testing.T) {
	srv := &apiKeysServer{keys: []string{"a", "b", "c"}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	keys := identity.NewGatewayKeys(sdkClient(hs.URL), 5*time.Minute, clk.Now, nil)
	ctx := context.Background()

	steps := []struct {
		name      string
		advance   time.Duration
		addKey    string
		lookup    string
		want      identity.KeyStatus
		wantCalls int64 // cumulative HTTP requests (3 per listing: one key a page)
	}{
		{"first lookup lists every page", 0, "", "c", identity.KeyKnown, 3},
		{"known key: no listing", time.Second, "", "a", identity.KeyKnown, 3},
		{"unknown key within the interval: no listing", time.Second, "", "zzz", identity.KeyUnknown, 3},
		{"new key after the interval: one listing finds it", identity.UnknownKeyRefreshInterval, "d", "d", identity.KeyKnown, 7},
		{"another unknown key right after: no listing", time.Second, "", "yyy", identity.KeyUnknown, 7},
		{"stale list is read again", 5 * time.Minute, "", "a", identity.KeyKnown, 11},
	}
	for _, s := range steps {
		clk.now = clk.now.Add(s.advance)
		if s.addKey != "" {
			srv.mu.Lock()
			srv.keys = append(srv.keys, s.addKey)
			srv.mu.Unlock()
		}
		if got := keys.Lookup(ctx, identity.KeyHash(s.lookup)); got != s.want {
			t.Errorf("%s: Lookup = %v, want %v", s.name, got, s.want)
		}
		if got := srv.calls.Load(); got != s.wantCalls {
			t.Errorf("%s: %d API calls so far, want %d", s.name, got, s.wantCalls)
		}
	}
}

// TestGatewayKeysUnreachable: a list that was never read leaves keys
// unverifiable (the caller is counted as anonymous, not refused).
func TestGatewayKeysUnreachable(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"message":"boom"}`, http.StatusInternalServerError)
	}))
	defer hs.Close()
	keys := identity.NewGatewayKeys(sdkClient(hs.URL), time.Minute, nil, nil)
	if got := keys.Lookup(context.Background(), identity.KeyHash("k")); got != identity.KeyUnverifiable {
		t.Errorf("Lookup = %v, want KeyUnverifiable", got)
	}
}

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

	hsSecret := []byte("hs-secret-for-tests")
	clk := &clock{now: time.Now()}
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

	t.Run("a new kid is fetched once, then unknown kids wait for the interval", func(t *testing.T) {
		setKeys(true)
		before := jwks.fetches.Load()
		// The last fetch (Prefetch) was under JWKSRefetchInterval ago: the
		// rotated-in key is not fetched yet, and forged kids cost nothing.
		for i := 0; i < 5; i++ {
			if _, err := v.Verify(context.Background(), sign(jwt.SigningMethodES256, "forged-kid", claims(nil), ecKey)); err == nil {
				t.Fatal("a token with an unknown kid verified")
			}
		}
		if got := jwks.fetches.Load() - before; got != 0 {
			t.Errorf("%d JWKS fetches within the refetch interval, want 0", got)
		}
		// After the interval, the first token naming the new kid fetches
		// the set once and verifies; the next one needs no fetch.
		clk.now = clk.now.Add(identity.JWKSRefetchInterval)
		for i := 0; i < 2; i++ {
			if sub, err := v.Verify(context.Background(), sign(jwt.SigningMethodES256, "ec-1", claims(nil), ecKey)); err != nil || sub != "alice" {
				t.Fatalf("ES256 token with the rotated-in kid: %q, %v", sub, err)
			}
		}
		if got := jwks.fetches.Load() - before; got != 1 {
			t.Errorf("%d JWKS fetches for the rotated-in key, want 1", got)
		}
	})
}

func TestResolverOrder(t *testing.T) {
	secret := []byte("s")
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
