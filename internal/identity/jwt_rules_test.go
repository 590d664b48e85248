package identity_test

import (
	"context"

	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
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
)

// rulesSecret is the HS256 secret of the claim rule tests (32 bytes).
const rulesSecret = "claim-rules-hs256-secret-0123456"

// rawToken signs an HS256 token whose payload is the given JSON as is, so
// that claims can have types jwt.MapClaims would not produce.
func rawToken(t *testing.T, payload string) string {
	t.Helper()
	signingInput := b64([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + b64([]byte(payload))
	sig, err := jwt.SigningMethodHS256.Sign(signingInput, []byte(rulesSecret))
	if err != nil {
		t.Fatal(err)
	}
	return signingInput + "." + b64(sig)
}

// TestVerifierClaimRules: exp, nbf and iat are JSON numbers from 0 to the
// year 9999; exp is at most a year ahead of now and of iat; iat is not
// ahead of now; the leeway tolerates a few seconds of skew, no more. The
// reason of every refusal names the rule and never quotes the token.
func TestVerifierClaimRules(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := identity.NewVerifier(identity.VerifierConfig{
		Issuer: "iss", Audience: "aud", HS256Secret: []byte(rulesSecret),
		Leeway: identity.DefaultLeeway, Now: func() time.Time { return now },
	})
	at := func(d time.Duration) string { return jsonNumber(now.Add(d).Unix()) }
	day := 24 * time.Hour
	claims := func(extra string) string {
		return `{"iss":"iss","aud":"aud","sub":"alice"` + extra + `}`
	}
	cases := []struct {
		name, payload string
		reason        string // "" when the token verifies
	}{
		{"exp an hour ahead", claims(`,"exp":` + at(time.Hour)), ""},
		{"exp fractional", claims(`,"exp":` + at(time.Hour) + `.5`), ""},
		{"exp 364 days ahead", claims(`,"exp":` + at(364*day)), ""},
		{"exp more than a year ahead", claims(`,"exp":` + at(366*day)), "exp is more than"},
		{"exp in the year 5138 (1e11)", claims(`,"exp":1e11`), "exp is more than"},
		{"exp of 1e17 seconds", claims(`,"exp":1e17`), "exp: not a number of seconds"},
		{"exp of 1e30 seconds", claims(`,"exp":1e30`), "exp: not a number of seconds"},
		{"exp of 1e400 (infinite)", claims(`,"exp":1e400`), "exp: not a number of seconds"},
		{"exp negative", claims(`,"exp":-1`), "exp: not a number of seconds"},
		{"exp a numeric string", claims(`,"exp":"` + at(time.Hour) + `"`), "exp: not a JSON number"},
		{"exp NaN as a string", claims(`,"exp":"NaN"`), "exp: not a JSON number"},
		{"exp true", claims(`,"exp":true`), "exp: not a JSON number"},
		{"exp an object", claims(`,"exp":{"n":1}`), "exp: not a JSON number"},
		{"exp null", claims(`,"exp":null`), "exp claim is required"},
		{"exp absent", claims(``), "exp claim is required"},
		{"exp past within the leeway", claims(`,"exp":` + at(-3*time.Second)), ""},
		{"exp past beyond the leeway", claims(`,"exp":` + at(-7*time.Second)), "token is expired"},
		{"nbf a numeric string", claims(`,"exp":` + at(time.Hour) + `,"nbf":"` + at(-time.Hour) + `"`), "nbf: not a JSON number"},
		{"nbf ahead beyond the leeway", claims(`,"exp":` + at(time.Hour) + `,"nbf":` + at(time.Minute)), "token is not valid yet"},
		{"iat a numeric string", claims(`,"exp":` + at(time.Hour) + `,"iat":"` + at(0) + `"`), "iat: not a JSON number"},
		{"iat now", claims(`,"exp":` + at(time.Hour) + `,"iat":` + at(0)), ""},
		{"iat ahead within the leeway", claims(`,"exp":` + at(time.Hour) + `,"iat":` + at(3*time.Second)), ""},
		{"iat ahead beyond the leeway", claims(`,"exp":` + at(time.Hour) + `,"iat":` + at(time.Minute)), "token used before issued"},
		{"exp more than a year after iat", claims(`,"exp":` + at(300*day) + `,"iat":` + at(-70*day)), "exp is more than 8760h0m0s after iat"},
		{"exp a year after iat", claims(`,"exp":` + at(300*day) + `,"iat":` + at(-65*day)), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			token := rawToken(t, tc.payload)
			sub, err := v.Verify(context.Background(), token)
			if tc.reason == "" {
				if err != nil || sub != "alice" {
					t.Fatalf("Verify = %q, %v; want alice", sub, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify accepted it (sub %q); want a refusal for %q", sub, tc.reason)
			}
			if !errors.Is(err, identity.ErrTokenInvalid) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Verify error %q, want one wrapping ErrTokenInvalid that says %q", err, tc.reason)
			}
			if strings.Contains(err.Error(), token) {
				t.Error("the error quotes the token")
			}
		})
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestVerifierLeeway: the leeway is the configured one, none when zero,
// and at most MaxLeeway.
func TestVerifierLeeway(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	cases := []struct {
		name    string
		leeway  time.Duration
		expiry  time.Duration // exp relative to now
		accepts bool
	}{
		{"no leeway: a second past is expired", 0, -time.Second, false},
		{"no leeway: a second ahead is valid", 0, time.Second, true},
		{"a minute of leeway: 30s past is valid", time.Minute, -30 * time.Second, true},
		{"a minute of leeway: 61s past is expired", time.Minute, -61 * time.Second, false},
		{"an hour asked: clamped to MaxLeeway", time.Hour, -identity.MaxLeeway - time.Second, false},
		{"an hour asked: MaxLeeway still applies", time.Hour, -identity.MaxLeeway + time.Second, true},
		{"negative: none", -time.Minute, time.Second, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := identity.NewVerifier(identity.VerifierConfig{
				Issuer: "iss", Audience: "aud", HS256Secret: []byte(rulesSecret),
				Leeway: tc.leeway, Now: func() time.Time { return now },
			})
			token := rawToken(t, `{"iss":"iss","aud":"aud","sub":"alice","exp":`+jsonNumber(now.Add(tc.expiry).Unix())+`}`)
			if _, err := v.Verify(context.Background(), token); (err == nil) != tc.accepts {
				t.Errorf("Verify error %v, want accepted=%v", err, tc.accepts)
			}
		})
	}
}

// TestVerifierHS256SecretLength: an HS256 secret shorter than 32 bytes is
// refused, given at construction or set later, and HS256 tokens then do
// not verify at all (they are refused, not ignored), even when signed with
// that secret or with one set before.
func TestVerifierHS256SecretLength(t *testing.T) {
	short := []byte("a-31-byte-hs256-secret-0123456.")
	long := []byte("a-32-byte-hs256-secret-01234567.")
	if len(short) != identity.MinHS256SecretLen-1 || len(long) != identity.MinHS256SecretLen {
		t.Fatalf("test secrets of %d and %d bytes", len(short), len(long))
	}
	token := func(secret []byte) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "iss", "aud": "aud", "sub": "bob", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("at construction", func(t *testing.T) {
		v := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", HS256Secret: short})
		if v == nil {
			t.Fatal("no verifier: tokens would be ignored instead of refused")
		}
		_, err := v.Verify(context.Background(), token(short))
		if err == nil || !strings.Contains(err.Error(), "HS256 secret of 31 bytes refused") {
			t.Fatalf("Verify error %v, want the short secret's refusal", err)
		}
	})
	t.Run("set later", func(t *testing.T) {
		v := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", HS256SecretPending: true})
		err := v.SetHS256Secret(short)
		if err == nil || !strings.Contains(err.Error(), "at least 32 bytes") || strings.Contains(err.Error(), string(short)) {
			t.Fatalf("SetHS256Secret(short) = %v, want a refusal that does not quote it", err)
		}
		if _, err := v.Verify(context.Background(), token(short)); err == nil {
			t.Fatal("a token signed with the refused secret verified")
		}
		if err := v.SetHS256Secret(long); err != nil {
			t.Fatal(err)
		}
		if sub, err := v.Verify(context.Background(), token(long)); err != nil || sub != "bob" {
			t.Fatalf("with a 32-byte secret: %q, %v", sub, err)
		}
		if err := v.SetHS256Secret(nil); err == nil {
			t.Fatal("an empty secret was accepted")
		}
		if _, err := v.Verify(context.Background(), token(long)); err == nil {
			t.Fatal("the secret before a refused one still verifies")
		}
	})
}

// algKeys are the keys of TestVerifierAlgRules.
type algKeys struct {
	rsa  *rsa.PrivateKey
	p256 *ecdsa.PrivateKey
	p384 *ecdsa.PrivateKey
	ed   ed25519.PrivateKey
}

func newAlgKeys(t *testing.T) algKeys {
	t.Helper()
	var k algKeys
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if k.p256, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if k.p384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	if _, k.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	return k
}

func rsaJWK(kid, alg string, k *rsa.PublicKey) map[string]string {
	m := map[string]string{"kty": "RSA", "kid": kid, "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

func ecJWK(t *testing.T, kid, alg string, k *ecdsa.PublicKey) map[string]string {
	t.Helper()
	b, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	size := (len(b) - 1) / 2
	m := map[string]string{"kty": "EC", "kid": kid, "crv": k.Curve.Params().Name, "x": b64(b[1 : 1+size]), "y": b64(b[1+size:])}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

// es384WithP256 signs an ES384 token with a P-256 key: the SHA-384 digest,
// which ECDSA truncates to the curve's 256 bits, and r and s padded to the
// 48 bytes each of ES384. Without a curve check this verifies.
func es384WithP256(t *testing.T, key *ecdsa.PrivateKey, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES384, claims)
	tok.Header["kid"] = kid
	signingInput, err := tok.SigningString()
	if err != nil {
		t.Fatal(err)
	}
	digest := sha512.Sum384([]byte(signingInput))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 96)
	r.FillBytes(sig[:48])
	s.FillBytes(sig[48:])
	return signingInput + "." + b64(sig)
}

// TestVerifierAlgRules: a JWKS key verifies only the algs of its type and
// curve, and only its own alg when its JWK names one; an HS256 token is
// never checked with a JWKS key (algorithm confusion), with or without an
// HS256 secret configured; "none" never verifies.
func TestVerifierAlgRules(t *testing.T) {
	keys := newAlgKeys(t)
	edPub := keys.ed.Public().(ed25519.PublicKey)
	doc, err := json.Marshal(map[string]any{"keys": []map[string]string{
		rsaJWK("rsa-rs256", "RS256", &keys.rsa.PublicKey),
		rsaJWK("rsa-any", "", &keys.rsa.PublicKey),
		ecJWK(t, "p256-es256", "ES256", &keys.p256.PublicKey),
		ecJWK(t, "p256-any", "", &keys.p256.PublicKey),
		ecJWK(t, "p384-any", "", &keys.p384.PublicKey),
		{"kty": "OKP", "kid": "ed", "crv": "Ed25519", "alg": "EdDSA", "x": b64(edPub)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(doc) }))
	defer srv.Close()
	hsSecret := []byte("alg-rules-hs256-secret-0123456789")
	jwksOnly := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", JWKSURL: srv.URL, Leeway: identity.DefaultLeeway})
	withHS := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", JWKSURL: srv.URL, HS256Secret: hsSecret, Leeway: identity.DefaultLeeway})
	for _, v := range []*identity.Verifier{jwksOnly, withHS} {
		if err := v.Prefetch(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	claims := jwt.MapClaims{"iss": "iss", "aud": "aud", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	sign := func(m jwt.SigningMethod, kid string, key any) string {
		tok := jwt.NewWithClaims(m, claims)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pkix, err := x509.MarshalPKIXPublicKey(&keys.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		token  string
		reason string // "" when the token verifies
	}{
		{"RS256 with the key whose JWK says RS256", sign(jwt.SigningMethodRS256, "rsa-rs256", keys.rsa), ""},
		{"PS256 with the key whose JWK says RS256", sign(jwt.SigningMethodPS256, "rsa-rs256", keys.rsa), "alg PS256 differs from the alg RS256"},
		{"RS512 with the key whose JWK says RS256", sign(jwt.SigningMethodRS512, "rsa-rs256", keys.rsa), "alg RS512 differs from the alg RS256"},
		{"PS384 with an RSA key whose JWK names no alg", sign(jwt.SigningMethodPS384, "rsa-any", keys.rsa), ""},
		{"ES256 with the P-256 key whose JWK says ES256", sign(jwt.SigningMethodES256, "p256-es256", keys.p256), ""},
		{"ES256 with a P-256 key whose JWK names no alg", sign(jwt.SigningMethodES256, "p256-any", keys.p256), ""},
		{"ES384 signed with a P-256 key (curve confusion)", es384WithP256(t, keys.p256, "p256-any", claims), "alg ES384 does not fit"},
		{"ES384 with the P-384 key", sign(jwt.SigningMethodES384, "p384-any", keys.p384), ""},
		{"EdDSA with the Ed25519 key", sign(jwt.SigningMethodEdDSA, "ed", keys.ed), ""},
		{"RS256 naming an EC kid", sign(jwt.SigningMethodRS256, "p256-any", keys.rsa), "alg RS256 does not fit"},
		{"ES256 naming an RSA kid", sign(jwt.SigningMethodES256, "rsa-any", keys.p256), "alg ES256 does not fit"},
		{"EdDSA naming an RSA kid", sign(jwt.SigningMethodEdDSA, "rsa-any", keys.ed), "alg EdDSA does not fit"},
		{"HS256 keyed with the RSA public key PEM", sign(jwt.SigningMethodHS256, "rsa-rs256", rsaPEM), "signature is invalid"},
		{"HS256 keyed with the RSA modulus", sign(jwt.SigningMethodHS256, "rsa-any", keys.rsa.N.Bytes()), "signature is invalid"},
		{"HS256 keyed with the JWKS document", sign(jwt.SigningMethodHS256, "rsa-any", doc), "signature is invalid"},
		{"HS256 keyed with the Ed25519 public key", sign(jwt.SigningMethodHS256, "ed", []byte(edPub)), "signature is invalid"},
		{"alg none", none, "signing method none is invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for name, v := range map[string]*identity.Verifier{"JWKS only": jwksOnly, "JWKS and HS256": withHS} {
				sub, err := v.Verify(context.Background(), tc.token)
				switch {
				case tc.reason == "" && (err != nil || sub != "alice"):
					t.Errorf("%s: Verify = %q, %v; want alice", name, sub, err)
				case tc.reason != "" && err == nil:
					t.Errorf("%s: Verify accepted it (sub %q)", name, sub)
				case tc.reason != "" && name == "JWKS only" && strings.HasPrefix(tc.name, "HS256"):
					// Without an HS256 secret, HS256 is not an accepted alg at all.
					if !strings.Contains(err.Error(), "signing method HS256 is invalid") {
						t.Errorf("%s: Verify error %q, want HS256 refused as a method", name, err)
					}
				case tc.reason != "" && !strings.Contains(err.Error(), tc.reason):
					t.Errorf("%s: Verify error %q, want one saying %q", name, err, tc.reason)
				}
			}
		})
	}
}

// TestParseJWKSAlg: a JWK's alg is kept, and a JWK whose alg does not fit
// its key type or curve, or whose use is not "sig", is skipped.
func TestParseJWKSAlg(t *testing.T) {
	keys := newAlgKeys(t)
	rsaPub, p256 := &keys.rsa.PublicKey, &keys.p256.PublicKey
	cases := []struct {
		name    string
		jwk     map[string]string
		wantAlg string
		kept    bool
	}{
		{"RSA naming RS256", rsaJWK("k", "RS256", rsaPub), "RS256", true},
		{"RSA naming PS512", rsaJWK("k", "PS512", rsaPub), "PS512", true},
		{"RSA naming no alg", rsaJWK("k", "", rsaPub), "", true},
		{"RSA naming HS256", rsaJWK("k", "HS256", rsaPub), "", false},
		{"RSA naming none", rsaJWK("k", "none", rsaPub), "", false},
		{"RSA naming ES256", rsaJWK("k", "ES256", rsaPub), "", false},
		{"RSA naming an encryption alg", rsaJWK("k", "RSA-OAEP", rsaPub), "", false},
		{"P-256 naming ES256", ecJWK(t, "k", "ES256", p256), "ES256", true},
		{"P-256 naming ES384", ecJWK(t, "k", "ES384", p256), "", false},
		{"P-256 naming RS256", ecJWK(t, "k", "RS256", p256), "", false},
		{"RSA for encryption", func() map[string]string { m := rsaJWK("k", "", rsaPub); m["use"] = "enc"; return m }(), "", false},
		{"RSA of an unknown use", func() map[string]string { m := rsaJWK("k", "", rsaPub); m["use"] = "other"; return m }(), "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A second, plain key keeps the set non-empty when the first is skipped.
			doc, err := json.Marshal(map[string]any{"keys": []map[string]string{tc.jwk, rsaJWK("other", "", rsaPub)}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := identity.ParseJWKS(doc)
			if err != nil {
				t.Fatal(err)
			}
			k, ok := got["k"]
			if ok != tc.kept || k.Alg != tc.wantAlg {
				t.Errorf("kept %v with alg %q, want kept %v with alg %q", ok, k.Alg, tc.kept, tc.wantAlg)
			}
		})
	}
}

// TestCheckJWKSURL: https anywhere, http only on a loopback host.
func TestCheckJWKSURL(t *testing.T) {
	cases := []struct {
		url string
		ok  bool
	}{
		{"https://issuer.example/.well-known/jwks.json", true},
		{"https://issuer.example:8443/jwks", true},
		{"http://127.0.0.1:8080/jwks", true},
		{"http://127.9.9.9/jwks", true},
		{"http://[::1]:8080/jwks", true},
		{"http://[::ffff:127.0.0.1]/jwks", true},
		{"http://localhost:8080/jwks", true},
		{"http://LocalHost/jwks", true},
		{"http://issuer.example/jwks", false},
		{"http://10.0.0.1/jwks", false},
		{"http://0.0.0.0/jwks", false},
		{"http://localhost.issuer.example/jwks", false},
		{"http://127.0.0.1.nip.io/jwks", false},
		{"ftp://issuer.example/jwks", false},
		{"HTTPS://issuer.example/jwks", true},
		{"issuer.example/jwks", false},
		{"https:///jwks", false},
		{"https://:443/jwks", false},
		{"", false},
		{"%zz", false},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			if err := identity.CheckJWKSURL(tc.url); (err == nil) != tc.ok {
				t.Errorf("CheckJWKSURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
			}
		})
	}
}

// TestVerifierRefusesPlainHTTPJWKS: a JWKS URL that is http on a host that
// is not loopback is never fetched (no connection is even attempted), and
// the tokens it would verify are refused saying why.
func TestVerifierRefusesPlainHTTPJWKS(t *testing.T) {
	var dials atomic.Int64
	client := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("the test network refuses every connection")
	}}}
	v := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", JWKSURL: "http://issuer.example/jwks", HTTPClient: client})
	if v == nil {
		t.Fatal("no verifier: tokens would be ignored instead of refused")
	}
	if err := v.Prefetch(context.Background()); err == nil || !strings.Contains(err.Error(), "JWT_JWKS_URL refused") {
		t.Errorf("Prefetch = %v, want JWT_JWKS_URL refused", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": "iss", "aud": "aud", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	signed, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), signed); err == nil || !strings.Contains(err.Error(), "JWT_JWKS_URL refused") {
		t.Errorf("Verify = %v, want JWT_JWKS_URL refused", err)
	}
	if err := v.Wait(context.Background()); err != nil {
		t.Errorf("Wait = %v, want nothing in flight", err)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d connections attempted to the refused JWKS URL", n)
	}
}

// TestJWKSRedirects: a JWKS fetch follows a redirect on the same host, and
// refuses one to another host or from https to http.
func TestJWKSRedirects(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(map[string]any{"keys": []map[string]string{rsaJWK("k", "RS256", &key.PublicKey)}})
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	keysHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/keys" {
			http.NotFound(w, r)
			return
		}
		served.Add(1)
		_, _ = w.Write(doc)
	})
	plain := httptest.NewServer(keysHandler)
	defer plain.Close()
	_, plainPort, err := net.SplitHostPort(plain.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	redirectTo := func(target string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/keys" {
				keysHandler(w, r)
				return
			}
			http.Redirect(w, r, target, http.StatusFound)
		})
	}
	sameHost := httptest.NewServer(redirectTo("/keys"))
	defer sameHost.Close()
	otherHost := httptest.NewServer(redirectTo("http://localhost:" + plainPort + "/keys"))
	defer otherHost.Close()
	downgrade := httptest.NewTLSServer(redirectTo("http://127.0.0.1:" + plainPort + "/keys"))
	defer downgrade.Close()
	tlsSameHost := httptest.NewTLSServer(redirectTo("/keys"))
	defer tlsSameHost.Close()

	cases := []struct {
		name   string
		url    string
		client *http.Client
		reason string // "" when the fetch succeeds
	}{
		{"redirect on the same host", sameHost.URL + "/jwks", nil, ""},
		{"https redirect on the same host", tlsSameHost.URL + "/jwks", tlsSameHost.Client(), ""},
		{"redirect to another host", otherHost.URL + "/jwks", nil, "redirect to another host refused"},
		{"redirect from https to http", downgrade.URL + "/jwks", downgrade.Client(), "redirect from https to http refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := served.Load()
			v := identity.NewVerifier(identity.VerifierConfig{Issuer: "iss", Audience: "aud", JWKSURL: tc.url, HTTPClient: tc.client})
			err := v.Prefetch(context.Background())
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("Prefetch = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Prefetch = %v, want %q", err, tc.reason)
			}
			if served.Load() != before {
				t.Error("the redirect target was fetched")
			}
		})
	}
}
