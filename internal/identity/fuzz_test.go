package identity_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/internal/identity"
)

// The fuzz targets' fixed credentials, which the seed tokens in
// testdata/fuzz/FuzzVerifyToken were signed with (valid until exp
// 1900000000, judged at fuzzNow). The RSA key exists for these tests only;
// its PEM says TESTING KEY so that no scanner mistakes it for a leaked one.
const (
	fuzzIssuer   = "https://issuer.fuzz.test"
	fuzzAudience = "fuzz"
	fuzzHS256    = "fuzz-hs256-secret-for-tests-only"
	fuzzKid      = "fuzz-rsa"
	fuzzRSAKey   = `-----BEGIN TESTING KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCwjznikG1PJaIA
aqwfoD5Gce2NVTc8Ryq4VERwiagkJkt4CffWsHbGYLmU1AHiPvP4lMTXm0WI2yFH
EieYr7xg2aDZjtLVIXAy6/4jt7+lMLYX82EwfITwGG821qznCYrt51jtC2WoSw0/
HkOO38ww3voLIef+RRYt6c4OWTcB0xWtnZRLMVpGA55bQTB/5kD09B7eQgX8chG8
NRSpX+QtqTetl+mrtt/Nw0PVyhHwtGap3ymePLPjQrBvDjU8ototTLSX1g8yFKZZ
7F+NBYOHEwmircnDyXtbGlHY6iIL0CPYAm5fU/5LqrCvsuzX93OyabWcisaBSdcf
tSrFNzLrAgMBAAECggEAA641/d1BN2qolLX545ONaMjcM7Dd52bxDYmi1EO9BQ/l
TS8hWFDdEP1C28bgSS1DHGChioBlSS6O5DKNL8IjZ6jHERyd6YJ6b8f6nWz+/5G4
jLRD8jpOR8utRH6Mzn4k7sOpV2ZVlqtbLysm1mDKRWSIitiImQTWAFwE3HNgpwGM
xF4wGEmhdGxAIA/xBU+Duxg5TK8xyjG04skAbMRDO6ZZY5rVY8ZFkX/LHPL6hTP4
5bL4q6qj9wAc0GlV4K9iDL2g1f17Kz/aIEt/8zH2JDeenPT7JjnSYWvF7Ub3i1ab
jTsOXCA7BhtuY4yvdeJEVfzlCuUdI/09evcZMSCoiQKBgQDY/bJg+94iD/Goqghh
hEvZ1hVc+rdYDzloy4bN+BMU/4rznBSIIiTcl93+lDmWzstyQfdMbkgTQX6LBngP
aDyPKuQu4zGT2uab8fFVn3SUN3/XYFdHtc7j79TMJJpp2VzrqM5I3uYURDpQ2JsA
5NjTDBK5hvBlC1VCANlV5DR/wwKBgQDQTMzZ1ntGUUvaVnvIiIKw1hxNWihuhHkz
A4C7uiJt0YjJjt0bx0ieOKt45dppDAS7QJxPP4NECXg6LDBn2RkLzlgcl2HWHe36
Y220QZgOCjGBqkHAMlZL+2efrdXTz3tkMBbVvCg9uiabjq+rwdNp2qu9YX8EB5uM
flkhwia1uQKBgGEOyTT8M9XEj/FDbNBBnrPnQFMAifXHiYRIVRnX9qET1JE2pTBn
JVnOTCvNHR1JjlKjEvyK7449Y17IG/e4Ri47nykh0lEyPqhORgZodnq9gF9T5nZa
6hmmcuaFENR7t0ZpkSujGALEqdjzqhFyS1HLOqzloK1xrkcBnjT/CESFAoGASiXc
kfrAfSJ5TuqUO6kkZJCDGKHsXJL5lcg8bhbvJIp/F8isOrQwzGm92FZx7gziLkns
mmUwc+qvCn4qaP0l5kb4pIzavd5/lS8JoS3sU6sbPl398823XGrM01GNGU31TY+0
wTauWHLIRX2AWTKw8DBwDAUFssiGfXeIgPTc1LkCgYEAvKHx90rhSa1uFQ4/jioK
29mTAk82bZoLRW2r1dB3A6g0psU+aWFAmw2Z6VxUekidgZENKZ7vllInsQf9/p9P
yiSVYhVZkHYbmn1EzIhyMi9P6wZIk91J+X+GY6sE0aEmL6ZjpHpr2zniA9TsqK2R
eYflpqdQr849KDhWfwI8sWI=
-----END TESTING KEY-----`
)

// fuzzNow is within MaxTokenLifetime of the seeds' exp.
var fuzzNow = time.Unix(1_880_000_000, 0)

func fuzzRSA(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	block, _ := pem.Decode([]byte(strings.ReplaceAll(fuzzRSAKey, "TESTING KEY", "PRIVATE KEY")))
	if block == nil {
		tb.Fatal("fuzz RSA key: no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return key.(*rsa.PrivateKey)
}

// FuzzVerifyToken: no token string panics Verify, and none verifies unless
// it is validly signed, by the HS256 secret or the JWKS's RSA key, as
// checked here with crypto primitives, apart from the verifier's own
// parsing and key selection.
func FuzzVerifyToken(f *testing.F) {
	key := fuzzRSA(f)
	doc, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": fuzzKid, "use": "sig",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		f.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(doc) }))
	defer jwks.Close()
	v := identity.NewVerifier(identity.VerifierConfig{
		Issuer: fuzzIssuer, Audience: fuzzAudience, HS256Secret: []byte(fuzzHS256), JWKSURL: jwks.URL,
		Leeway: identity.DefaultLeeway, Now: func() time.Time { return fuzzNow },
		// The plan claim's decoding runs on every token that gets that far.
		PlanClaim: "plan",
	})
	// pinned holds the same RSA key, its JWK naming RS256: it verifies no
	// other alg with it.
	pinnedDoc, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": fuzzKid, "use": "sig", "alg": "RS256",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	if err != nil {
		f.Fatal(err)
	}
	pinnedJWKS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(pinnedDoc) }))
	defer pinnedJWKS.Close()
	pinned := identity.NewVerifier(identity.VerifierConfig{
		Issuer: fuzzIssuer, Audience: fuzzAudience, JWKSURL: pinnedJWKS.URL,
		Leeway: identity.DefaultLeeway, Now: func() time.Time { return fuzzNow },
	})
	// With the clock fixed, no unknown kid ever refetches: the fuzzing
	// itself never reaches the network.
	for _, v := range []*identity.Verifier{v, pinned} {
		if err := v.Prefetch(context.Background()); err != nil {
			f.Fatal(err)
		}
	}

	// Seeds signed now, besides those in testdata.
	claims := jwt.MapClaims{"iss": fuzzIssuer, "aud": fuzzAudience, "sub": "bob", "exp": fuzzNow.Add(time.Hour).Unix()}
	for _, s := range []struct {
		method jwt.SigningMethod
		key    any
	}{{jwt.SigningMethodHS256, []byte(fuzzHS256)}, {jwt.SigningMethodRS256, key}, {jwt.SigningMethodPS512, key}} {
		tok := jwt.NewWithClaims(s.method, claims)
		tok.Header["kid"] = fuzzKid
		signed, err := tok.SignedString(s.key)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := v.Verify(context.Background(), signed); err != nil {
			f.Fatalf("seed %s does not verify: %v", s.method.Alg(), err)
		}
		f.Add(signed)
	}
	// Validly signed seeds that break a claim rule: they must not verify,
	// and mutating them explores the claim decoding.
	for _, c := range []jwt.MapClaims{
		{"exp": 1e17},
		{"exp": "1880003600"},
		{"exp": fuzzNow.Add(2 * identity.MaxTokenLifetime).Unix()},
		{"iat": fuzzNow.Add(time.Hour).Unix()},
		{"nbf": "0"},
		{"exp": fuzzNow.Add(300 * 24 * time.Hour).Unix(), "iat": fuzzNow.Add(-100 * 24 * time.Hour).Unix()},
	} {
		bad := jwt.MapClaims{"iss": fuzzIssuer, "aud": fuzzAudience, "sub": "bob", "exp": fuzzNow.Add(time.Hour).Unix()}
		for k, val := range c {
			bad[k] = val
		}
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, bad)
		tok.Header["kid"] = fuzzKid
		signed, err := tok.SignedString(key)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := v.Verify(context.Background(), signed); err == nil {
			f.Fatalf("seed with claims %v verifies", c)
		}
		f.Add(signed)
	}

	f.Fuzz(func(t *testing.T, token string) {
		sub, err := v.Verify(context.Background(), token)
		if err != nil {
			if !errors.Is(err, identity.ErrTokenInvalid) {
				t.Fatalf("error %v does not wrap ErrTokenInvalid", err)
			}
			if len(token) >= 16 && strings.Contains(err.Error(), token) {
				t.Fatal("the error quotes the token")
			}
		} else {
			if !validlySigned(token, []byte(fuzzHS256), &key.PublicKey) {
				t.Fatalf("Verify accepted a token that is not validly signed: %q", token)
			}
			if sub == "" || len(sub) > 512 {
				t.Fatalf("Verify returned the subject %q", sub)
			}
			if why := claimRuleBroken(token); why != "" {
				t.Fatalf("Verify accepted a token whose %s: %q", why, token)
			}
		}
		if _, err := pinned.Verify(context.Background(), token); err == nil {
			if alg := headerAlg(token); alg != "RS256" {
				t.Fatalf("the key pinned to RS256 verified a token of alg %q: %q", alg, token)
			}
			if !validlySigned(token, nil, &key.PublicKey) {
				t.Fatalf("the pinned verifier accepted a token that is not validly signed: %q", token)
			}
		}
	})
}

// headerAlg is the alg of a token's header, "" when it has none.
func headerAlg(token string) string {
	header, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return ""
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return ""
	}
	return h.Alg
}

// claimRuleBroken says which time claim rule a token's payload breaks, as
// judged at fuzzNow with DefaultLeeway, or "" when it keeps them all: exp
// present; exp, nbf and iat JSON numbers from 0 to the year 9999; exp not
// past, nbf and iat not ahead; exp at most MaxTokenLifetime after now and
// after iat.
func claimRuleBroken(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "shape is not a JWT"
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "payload is not base64url"
	}
	var times struct {
		Exp, Nbf, Iat json.RawMessage
	}
	if err := json.Unmarshal(raw, &times); err != nil {
		return "payload is not a JSON object"
	}
	seconds := func(r json.RawMessage) (float64, string) {
		r = json.RawMessage(strings.TrimSpace(string(r)))
		if len(r) == 0 || string(r) == "null" {
			return 0, "absent"
		}
		if c := r[0]; c != '-' && (c < '0' || c > '9') {
			return 0, "not a number"
		}
		f, err := strconv.ParseFloat(string(r), 64)
		if err != nil || f < 0 || f > 253402300799 {
			return 0, "out of range"
		}
		return f, ""
	}
	now := float64(fuzzNow.Unix())
	leeway := identity.DefaultLeeway.Seconds()
	lifetime := identity.MaxTokenLifetime.Seconds()
	exp, why := seconds(times.Exp)
	if why != "" {
		return "exp is " + why
	}
	if exp+leeway <= now || exp > now+lifetime {
		return "exp is past or too far ahead"
	}
	if nbf, why := seconds(times.Nbf); why != "" && why != "absent" {
		return "nbf is " + why
	} else if why == "" && nbf > now+leeway {
		return "nbf is ahead"
	}
	if iat, why := seconds(times.Iat); why != "" && why != "absent" {
		return "iat is " + why
	} else if why == "" && (iat > now+leeway || exp-iat > lifetime) {
		return "iat is ahead or too long before exp"
	}
	return ""
}

// validlySigned reports whether token's signature is that of its header's
// alg over its first two segments, by the HS256 secret or the RSA key.
func validlySigned(token string, secret []byte, pub *rsa.PublicKey) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	rawHeader, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return false
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(rawHeader, &header) != nil {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	signingInput := []byte(parts[0] + "." + parts[1])
	hashes := map[string]crypto.Hash{"256": crypto.SHA256, "384": crypto.SHA384, "512": crypto.SHA512}
	if len(header.Alg) != 5 {
		return false
	}
	h, ok := hashes[header.Alg[2:]]
	if !ok {
		return false
	}
	switch header.Alg[:2] {
	case "HS":
		if h != crypto.SHA256 {
			return false
		}
		mac := hmac.New(sha256.New, secret)
		mac.Write(signingInput)
		return hmac.Equal(mac.Sum(nil), sig)
	case "RS", "PS":
		d := h.New()
		d.Write(signingInput)
		if header.Alg[0] == 'R' {
			return rsa.VerifyPKCS1v15(pub, h, d.Sum(nil), sig) == nil
		}
		return rsa.VerifyPSS(pub, h, d.Sum(nil), sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto}) == nil
	}
	return false
}

// FuzzParseJWKS: no document panics ParseJWKS, and every key it returns is
// a usable public key of a supported type.
func FuzzParseJWKS(f *testing.F) {
	key := fuzzRSA(f)
	n, e := b64(key.N.Bytes()), b64(big.NewInt(int64(key.E)).Bytes())
	for _, alg := range []string{"RS256", "PS512", "HS256", "none", "ES256", "RSA-OAEP"} {
		doc, err := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k", "alg": alg, "n": n, "e": e}}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		keys, err := identity.ParseJWKS(doc)
		if err != nil {
			return
		}
		if len(keys) == 0 {
			t.Fatal("no error and no key")
		}
		for kid, jwk := range keys {
			switch jwk.Alg {
			case "", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519":
			default:
				t.Errorf("kid %q: key kept with alg %q", kid, jwk.Alg)
			}
			switch k := jwk.Key.(type) {
			case *rsa.PublicKey:
				if k.N.BitLen() < 2048 || k.E < 3 || k.E%2 == 0 {
					t.Errorf("kid %q: weak RSA key (%d bits, e=%d)", kid, k.N.BitLen(), k.E)
				}
				if a := jwk.Alg; a != "" && a[:2] != "RS" && a[:2] != "PS" {
					t.Errorf("kid %q: RSA key kept with alg %q", kid, a)
				}
			case *ecdsa.PublicKey:
				if _, err := k.Bytes(); err != nil {
					t.Errorf("kid %q: unusable EC key: %v", kid, err)
				}
				want := map[string]string{"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}[k.Curve.Params().Name]
				if jwk.Alg != "" && jwk.Alg != want {
					t.Errorf("kid %q: %s key kept with alg %q", kid, k.Curve.Params().Name, jwk.Alg)
				}
			case ed25519.PublicKey:
				if len(k) != ed25519.PublicKeySize {
					t.Errorf("kid %q: Ed25519 key of %d bytes", kid, len(k))
				}
				if a := jwk.Alg; a != "" && a != "EdDSA" && a != "Ed25519" {
					t.Errorf("kid %q: Ed25519 key kept with alg %q", kid, a)
				}
			default:
				t.Errorf("kid %q: unexpected key type %T", kid, k)
			}
		}
	})
}

// TestFuzzSeedsVerify keeps the "valid-*" seeds of FuzzVerifyToken valid,
// so that the fuzzer starts from the success path too.
func TestFuzzSeedsVerify(t *testing.T) {
	key := fuzzRSA(t)
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": fuzzKid, "n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(doc) }))
	defer jwks.Close()
	v := identity.NewVerifier(identity.VerifierConfig{
		Issuer: fuzzIssuer, Audience: fuzzAudience, HS256Secret: []byte(fuzzHS256), JWKSURL: jwks.URL,
		Leeway: identity.DefaultLeeway, Now: func() time.Time { return fuzzNow },
	})
	if err := v.Prefetch(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzVerifyToken", "valid-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid seeds: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		lit := strings.TrimSuffix(strings.TrimPrefix(lines[len(lines)-1], "string("), ")")
		token, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := v.Verify(context.Background(), token); err != nil {
			t.Errorf("%s does not verify: %v", name, err)
		}
	}
}
