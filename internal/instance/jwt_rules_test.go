package instance_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestJWTLoopholesClosed: through the runtime, deciding on a real Redis,
// tokens that exploit what the JWT checks used to let through earn
// nothing: each is unauthorized (401) and counted against its source IP's
// anonymous limit, and the decision log says which rule refused it. A
// token that follows the rules still earns the user tier.
func TestJWTLoopholesClosed(t *testing.T) {
	srv := redistest.StartServer(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const kid = "rs256-only"
	b64 := base64.RawURLEncoding.EncodeToString
	doc, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(doc) }))
	t.Cleanup(jwks.Close)
	// A 20-byte HS256 secret: one captured token is enough to brute-force
	// it offline and mint any sub.
	const weakSecret = "twenty-byte-secret!!"
	env := idEnv(srv.URL(), jwks.URL)
	env["JWT_HS256_SECRET"] = weakSecret

	now := time.Now()
	sign := func(m jwt.SigningMethod, secret any, claims jwt.MapClaims) string {
		t.Helper()
		base := jwt.MapClaims{"iss": idIssuer, "aud": idAudience, "sub": "mallory", "exp": now.Add(time.Hour).Unix()}
		for k, v := range claims {
			base[k] = v
		}
		tok := jwt.NewWithClaims(m, base)
		if m != jwt.SigningMethodHS256 {
			tok.Header["kid"] = kid
		}
		s, err := tok.SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name, token, reason string // reason "" for a token that earns the user tier
	}{
		{"RS256 token that follows the rules", sign(jwt.SigningMethodRS256, key, nil), ""},
		{"exp in a hundred years", sign(jwt.SigningMethodRS256, key, jwt.MapClaims{"exp": now.AddDate(100, 0, 0).Unix()}), "exp is more than 8760h0m0s ahead"},
		{"exp of 1e17 seconds", sign(jwt.SigningMethodRS256, key, jwt.MapClaims{"exp": 1e17}), "exp: not a number of seconds"},
		{"exp a string", sign(jwt.SigningMethodRS256, key, jwt.MapClaims{"exp": "99999999999"}), "exp: not a JSON number"},
		{"iat an hour ahead", sign(jwt.SigningMethodRS256, key, jwt.MapClaims{"iat": now.Add(time.Hour).Unix()}), "token used before issued"},
		{"PS256 with the key whose JWK says RS256", sign(jwt.SigningMethodPS256, key, nil), "alg PS256 differs from the alg RS256"},
		{"HS256 signed with the 20-byte secret", sign(jwt.SigningMethodHS256, []byte(weakSecret), nil), "HS256 secret of 20 bytes refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt, logs := idRuntime(t, env, instance.Options{})
			if err := rt.WaitLoaded(context.Background()); err != nil {
				t.Fatal(err)
			}
			o := idDecide(t, rt, map[string]string{"authorization": "Bearer " + tc.token})
			if tc.reason == "" {
				if o.Caller.Tier != identity.TierUser || o.Unauthorized() || !o.Result.Allowed {
					t.Fatalf("got %+v, want the user tier", o)
				}
				return
			}
			if o.Caller.Tier != identity.TierAnonymous || o.Caller.Identity != "ip:198.51.100.7" || !o.Unauthorized() || !o.Result.Allowed {
				t.Errorf("got %+v, want unauthorized, counted against the source IP's anonymous limit", o)
			}
			log := logs.String()
			if !strings.Contains(log, tc.reason) {
				t.Errorf("the decision log does not say %q:\n%s", tc.reason, log)
			}
			if strings.Contains(log, tc.token) || strings.Contains(log, weakSecret) {
				t.Error("the log quotes the token or the secret")
			}
			if !strings.Contains(log, "JWT_HS256_SECRET: 20 bytes, want at least 32") {
				t.Errorf("no start-up error for the short secret:\n%s", log)
			}
		})
	}
}

// TestJWTPlainHTTPJWKSRefused: a JWT_JWKS_URL that is plain http to a host
// that is not loopback is a start-up error naming the variable; it is never
// fetched, and the tokens it would verify are refused, not ignored.
func TestJWTPlainHTTPJWKSRefused(t *testing.T) {
	srv := redistest.StartServer(t)
	var dials atomic.Int64
	client := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("the test network refuses every connection")
	}}}
	const url = "http://jwks.example.test/keys"
	rt, logs := idRuntime(t, idEnv(srv.URL(), url), instance.Options{HTTPClient: client})
	if err := rt.WaitLoaded(context.Background()); err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": idIssuer, "aud": idAudience, "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	o := idDecide(t, rt, map[string]string{"authorization": "Bearer " + tok})
	if o.Caller.Tier != identity.TierAnonymous || !o.Unauthorized() {
		t.Errorf("got %+v, want unauthorized", o)
	}
	log := logs.String()
	for _, want := range []string{`JWT_JWKS_URL=\"` + url + `\": want an https:// URL`, "JWT_JWKS_URL refused"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d connections attempted to the refused JWKS URL", n)
	}
}
