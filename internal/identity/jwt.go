package identity

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Bearer token verification settings.
const (
	// JWKSRefetchInterval is the least time between two JWKS fetches: a
	// token with an unknown kid triggers a fetch at most this often, so
	// forged kids cannot turn the authorizer into a JWKS flooder.
	JWKSRefetchInterval = 30 * time.Second
	// DefaultLeeway is the clock skew tolerated on exp, nbf and iat when
	// JWT_LEEWAY is unset.
	DefaultLeeway = 5 * time.Second
	// MaxLeeway is the largest leeway VerifierConfig.Leeway may ask for;
	// more is clamped to it.
	MaxLeeway = 5 * time.Minute
	// MaxTokenLifetime bounds how far ahead a token's exp may be: at most
	// this long after now, and, when the token has an iat, at most this
	// long after iat. No mainstream issuer mints bearer tokens living
	// longer (their maxima are hours to 30 days); the bound refuses the
	// token that never expires (exp in the year 9999, or 1e17).
	MaxTokenLifetime = 365 * 24 * time.Hour
	// MinHS256SecretLen is the shortest HS256 secret accepted, in bytes:
	// the size of the SHA-256 output (RFC 7518, section 3.2). A shorter
	// secret can be brute-forced from any one token it signed.
	MinHS256SecretLen = 32
	// maxSubjectLen bounds the sub claim that becomes an identity.
	maxSubjectLen = 512
	// maxJWKSBytes bounds a JWKS document.
	maxJWKSBytes = 1 << 20
	// jwksTimeout bounds one JWKS fetch (in the background: no request
	// waits for it).
	jwksTimeout = 3 * time.Second
	// maxJWKSRedirects bounds the redirects a JWKS fetch follows.
	maxJWKSRedirects = 3
	// minRSABits is the smallest RSA modulus a JWKS may hold.
	minRSABits = 2048
	// maxNumericDate is the largest exp, nbf or iat decoded at all
	// (9999-12-31T23:59:59Z): beyond it the seconds no longer convert to a
	// time exactly on every platform.
	maxNumericDate = 253402300799
)

// ErrTokenInvalid is the error of every token that does not verify.
var ErrTokenInvalid = errors.New("token does not verify")

// VerifierConfig says how bearer tokens are verified.
type VerifierConfig struct {
	// Issuer and Audience are required claims (iss, aud); exp is required
	// too.
	Issuer   string
	Audience string
	// HS256Secret, when set, verifies HS256 tokens. A secret shorter than
	// MinHS256SecretLen is refused: HS256 tokens then never verify.
	HS256Secret []byte
	// HS256SecretPending says HS256 tokens are expected but the secret is
	// not known yet (it is still being read): they do not verify until
	// SetHS256Secret provides it.
	HS256SecretPending bool
	// JWKSURL, when set, verifies RS*, PS*, ES* and EdDSA tokens with the
	// keys it serves. It must pass CheckJWKSURL; when it does not, it is
	// never fetched and those tokens never verify.
	JWKSURL string
	// HTTPClient fetches the JWKS; a client with a short timeout when nil.
	// Either way the verifier fetches with a copy of it that refuses
	// redirects to another host or to plain http (CheckRedirect).
	HTTPClient *http.Client
	// Leeway is the clock skew tolerated on exp, nbf and iat: zero (or
	// less) tolerates none, more than MaxLeeway is MaxLeeway. The service
	// sets it from JWT_LEEWAY, DefaultLeeway when unset.
	Leeway time.Duration
	// Now is the clock of exp, nbf, iat and the JWKS refetch interval;
	// time.Now when nil.
	Now func() time.Time
	// Logger logs JWKS fetches.
	Logger *slog.Logger
	// PlanClaim is the claim naming the caller's plan (JWT_PLAN_CLAIM),
	// such as "plan" or a namespaced "https://example.com/plan"; empty
	// reads no plan.
	PlanClaim string
}

// Claims are what a verified token says about its caller.
type Claims struct {
	// Subject is the sub claim.
	Subject string
	// Plan is the plan claim (VerifierConfig.PlanClaim) in NormalizePlan's
	// form; "" when there is no plan claim, or it is not a JSON string
	// holding a plan name.
	Plan string
}

// Verifier verifies bearer JWTs. It is safe for concurrent use.
//
// A token verifies when all of these hold: its alg is HS256 (with an HS256
// secret configured) or one of RS256/384/512, PS256/384/512, ES256/384/512
// and EdDSA (with a JWKS configured), never "none"; an HS256 token is
// checked with the HS256 secret only, never with a JWKS key; any other
// token with the JWKS key of its kid, which must be of the alg's key type
// (RSA for RS and PS, the alg's curve for ES, Ed25519 for EdDSA) and, when
// the JWK names an alg, of exactly that alg; the signature holds; iss and
// aud are the configured ones; exp is present; exp, nbf and iat, when
// present, are JSON numbers from 0 to the year 9999; exp is not past, nbf
// and iat are not ahead (each within the leeway); exp is at most
// MaxTokenLifetime ahead of now and of iat; sub is present and at most 512
// bytes.
type Verifier struct {
	issuer, audience string
	planClaim        string
	parser           *jwt.Parser
	leeway           time.Duration
	now              func() time.Time
	// hs256 is nil when no HS256 secret is known (none configured, or
	// still pending) and otherwise the secret or why it was refused.
	hs256 atomic.Pointer[hs256Key]
	jwks  *jwksCache
}

// hs256Key is the verifier's HS256 secret, or the reason it has none.
type hs256Key struct {
	secret  []byte
	refused error
}

// NewVerifier returns a verifier, or nil when cfg has no key source (bearer
// tokens then earn nothing). It does not fetch the JWKS; Prefetch (at cold
// start) or the first token does, in the background.
func NewVerifier(cfg VerifierConfig) *Verifier {
	hs256 := len(cfg.HS256Secret) > 0 || cfg.HS256SecretPending
	if !hs256 && cfg.JWKSURL == "" {
		return nil
	}
	var methods []string
	if hs256 {
		methods = append(methods, "HS256")
	}
	if cfg.JWKSURL != "" {
		methods = append(methods, "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	leeway := min(max(cfg.Leeway, 0), MaxLeeway)
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
	}
	v := &Verifier{issuer: cfg.Issuer, audience: cfg.Audience, parser: jwt.NewParser(opts...), leeway: leeway, now: now, planClaim: cfg.PlanClaim}
	if len(cfg.HS256Secret) > 0 {
		// A refused secret is kept as the reason HS256 tokens do not
		// verify; the configuration reports it (JWT_HS256_SECRET).
		_ = v.SetHS256Secret(cfg.HS256Secret)
	}
	if cfg.JWKSURL != "" {
		logger := cfg.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		c := &jwksCache{url: cfg.JWKSURL, client: jwksClient(cfg.HTTPClient), logger: logger}
		if err := CheckJWKSURL(cfg.JWKSURL); err != nil {
			c.refused = fmt.Errorf("JWT_JWKS_URL refused: %w", err)
		}
		c.fetches = &refresher{load: c.fetch, timeout: jwksTimeout, now: now}
		v.jwks = c
	}
	return v
}

// SetHS256Secret sets the HS256 secret of a verifier made with
// HS256SecretPending (or replaces the one it has). A secret shorter than
// MinHS256SecretLen is refused with an error (which never quotes it), and
// HS256 tokens then do not verify at all: not with it, and not with a
// secret set before.
func (v *Verifier) SetHS256Secret(secret []byte) error {
	if len(secret) < MinHS256SecretLen {
		err := fmt.Errorf("HS256 secret of %d bytes refused: at least %d bytes are required", len(secret), MinHS256SecretLen)
		v.hs256.Store(&hs256Key{refused: err})
		return err
	}
	v.hs256.Store(&hs256Key{secret: append([]byte(nil), secret...)})
	return nil
}

// CheckJWKSURL reports whether raw may be a JWKS URL: an absolute https
// URL with a host, or an http one whose host is a loopback address
// (127.0.0.0/8, ::1 or localhost), which only a test or a sidecar on the
// same machine can serve. Anything else could hand the verification keys
// to whoever sits on the network path.
func CheckJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("not an absolute URL with a host")
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return errors.New("want an https:// URL (http:// only for a loopback host)")
}

// isLoopback reports whether host names the local machine: localhost, an
// address of 127.0.0.0/8 or ::1.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// jwksClient returns a copy of client (or of a default one) whose
// redirects stay on the JWKS URL's host and never leave https.
func jwksClient(client *http.Client) *http.Client {
	var c http.Client
	if client != nil {
		c = *client
	} else {
		c.Timeout = jwksTimeout
	}
	next := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := checkJWKSRedirect(req, via); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
	return &c
}

// checkJWKSRedirect refuses a redirect of a JWKS fetch to another host, to
// plain http from https, or past maxJWKSRedirects.
func checkJWKSRedirect(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	if len(via) > maxJWKSRedirects {
		return fmt.Errorf("more than %d redirects", maxJWKSRedirects)
	}
	first, prev := via[0].URL, via[len(via)-1].URL
	if !strings.EqualFold(req.URL.Hostname(), first.Hostname()) {
		return errors.New("redirect to another host refused")
	}
	if prev.Scheme == "https" && req.URL.Scheme != "https" {
		return errors.New("redirect from https to http refused")
	}
	if err := CheckJWKSURL(req.URL.String()); err != nil {
		return fmt.Errorf("redirect refused: %w", err)
	}
	return nil
}

// Prefetch fetches the JWKS, if one is configured, or joins the fetch in
// flight, and waits until it ends or ctx is done (the fetch then goes on in
// the background). It is for cold start: the only wait for a fetch a
// process ever does. A refused JWKSURL is never fetched: Prefetch returns
// why.
func (v *Verifier) Prefetch(ctx context.Context) error {
	if v == nil || v.jwks == nil {
		return nil
	}
	if v.jwks.refused != nil {
		return v.jwks.refused
	}
	return v.jwks.fetches.trigger(0).wait(ctx)
}

// Wait waits until the JWKS fetch in flight, if any, ends, and returns its
// error, or until ctx is done. It is for tests and tools that need a
// settled key set; Verify never waits.
func (v *Verifier) Wait(ctx context.Context) error {
	if v == nil || v.jwks == nil {
		return nil
	}
	if a := v.jwks.fetches.current(); a != nil {
		return a.wait(ctx)
	}
	return nil
}

// Verify checks a token as the Verifier documentation says and returns its
// subject. Every failure wraps ErrTokenInvalid and says which rule refused
// the token; the message never contains the token. It never waits for the
// network: a token whose kid is not in the JWKS already fetched does not
// verify, and starts a fetch in the background (at most one per
// JWKSRefetchInterval) for the tokens after it.
func (v *Verifier) Verify(ctx context.Context, token string) (string, error) {
	c, err := v.VerifyClaims(ctx, token)
	return c.Subject, err
}

// VerifyClaims is Verify returning the plan claim with the subject. A
// plan claim that is not a plan name does not fail the token: the caller
// simply has no plan.
func (v *Verifier) VerifyClaims(_ context.Context, token string) (Claims, error) {
	if v.issuer == "" || v.audience == "" {
		return Claims{}, fmt.Errorf("%w: JWT_ISSUER and JWT_AUDIENCE are not configured", ErrTokenInvalid)
	}
	if len(token) > maxCredentialLen {
		return Claims{}, fmt.Errorf("%w: longer than %d bytes", ErrTokenInvalid, maxCredentialLen)
	}
	claims := tokenClaims{planClaim: v.planClaim}
	if _, err := v.parser.ParseWithClaims(token, &claims, v.key); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrTokenInvalid, err)
	}
	if err := v.checkLifetime(&claims); err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrTokenInvalid, err)
	}
	if claims.Subject == "" || len(claims.Subject) > maxSubjectLen {
		return Claims{}, fmt.Errorf("%w: sub is empty or longer than %d bytes", ErrTokenInvalid, maxSubjectLen)
	}
	return Claims{Subject: claims.Subject, Plan: claims.plan}, nil
}

// key is the parser's keyfunc: the HS256 secret for an HS256 token (never
// a JWKS key: no algorithm confusion), the JWKS key of the kid for the
// others, if that key fits the token's alg. The parser has already refused
// algs outside the configured set, "none" among them.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if _, ok := t.Method.(*jwt.SigningMethodHMAC); ok {
		if alg != jwt.SigningMethodHS256.Alg() {
			return nil, fmt.Errorf("alg %s is not accepted", alg)
		}
		k := v.hs256.Load()
		switch {
		case k == nil:
			return nil, errors.New("no HS256 secret")
		case k.refused != nil:
			return nil, k.refused
		}
		return k.secret, nil
	}
	if v.jwks == nil {
		return nil, errors.New("no JWKS")
	}
	kid, _ := t.Header["kid"].(string)
	k, err := v.jwks.lookup(kid)
	if err != nil {
		return nil, err
	}
	if !algFitsKey(alg, k.Key) {
		return nil, fmt.Errorf("alg %s does not fit the type of the key of the kid", alg)
	}
	if k.Alg != "" && !sameAlg(k.Alg, alg) {
		return nil, fmt.Errorf("alg %s differs from the alg %s of the key of the kid", alg, k.Alg)
	}
	return k.Key, nil
}

// checkLifetime refuses an exp more than MaxTokenLifetime ahead of now or
// of iat. The parser has checked the rest of exp, nbf and iat.
func (v *Verifier) checkLifetime(c *tokenClaims) error {
	exp := c.ExpiresAt.Time
	if exp.After(v.now().Add(MaxTokenLifetime)) {
		return fmt.Errorf("exp is more than %s ahead", MaxTokenLifetime)
	}
	if c.IssuedAt != nil && exp.Sub(c.IssuedAt.Time) > MaxTokenLifetime {
		return fmt.Errorf("exp is more than %s after iat", MaxTokenLifetime)
	}
	return nil
}

// tokenClaims are the registered claims of a token, decoded strictly: exp,
// nbf and iat, when present and not null, must be JSON numbers (not
// strings, which the library would accept) from 0 to maxNumericDate.
type tokenClaims struct {
	jwt.RegisteredClaims
	// planClaim is the name of the plan claim to read ("" for none), set
	// before decoding; plan is its value, when it is a plan name.
	planClaim string
	plan      string
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *tokenClaims) UnmarshalJSON(b []byte) error {
	var times struct {
		Exp json.RawMessage `json:"exp"`
		Nbf json.RawMessage `json:"nbf"`
		Iat json.RawMessage `json:"iat"`
	}
	if err := json.Unmarshal(b, &times); err != nil {
		return err
	}
	for _, t := range []struct {
		name string
		raw  json.RawMessage
	}{{"exp", times.Exp}, {"nbf", times.Nbf}, {"iat", times.Iat}} {
		if err := checkNumericDate(t.raw); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	if c.planClaim != "" {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(b, &all); err != nil {
			return err
		}
		var plan string
		if raw, ok := all[c.planClaim]; ok && json.Unmarshal(raw, &plan) == nil {
			c.plan, _ = NormalizePlan(plan)
		}
	}
	return json.Unmarshal(b, &c.RegisteredClaims)
}

// checkNumericDate accepts an absent or null claim, or a JSON number of
// seconds from 0 to maxNumericDate.
func checkNumericDate(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return errors.New("not a JSON number")
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return fmt.Errorf("not a number of seconds from 0 to %d", maxNumericDate)
	}
	return nil
}

// jwksCache holds the JWKS of one URL, fetched at cold start and again, in
// the background and at most every JWKSRefetchInterval, when a token names
// a kid it does not hold.
type jwksCache struct {
	url     string
	client  *http.Client
	logger  *slog.Logger
	refused error                          // why url is never fetched (CheckJWKSURL), or nil
	keys    atomic.Pointer[map[string]JWK] // kid -> key; nil until a fetch succeeds
	fetches *refresher
}

// lookup returns the key of kid ("" when the token names none: allowed only
// when the set holds exactly one key) from the set already fetched.
func (c *jwksCache) lookup(kid string) (JWK, error) {
	if c.refused != nil {
		return JWK{}, c.refused
	}
	keys := c.keys.Load()
	if keys != nil {
		if key, ok := findKey(*keys, kid); ok {
			return key, nil
		}
	}
	c.fetches.trigger(JWKSRefetchInterval)
	if keys == nil {
		return JWK{}, errors.New("JWKS not fetched yet")
	}
	return JWK{}, errors.New("unknown kid")
}

func findKey(keys map[string]JWK, kid string) (JWK, bool) {
	if kid == "" {
		if len(keys) != 1 {
			return JWK{}, false
		}
		for _, k := range keys {
			return k, true
		}
	}
	k, ok := keys[kid]
	return k, ok
}

// fetch reads the JWKS and, when it parses, replaces the keys.
func (c *jwksCache) fetch(ctx context.Context) error {
	keys, err := c.read(ctx)
	if err != nil {
		c.logger.LogAttrs(ctx, slog.LevelError, "fetch JWKS failed; keeping the previous keys",
			slog.String("error", err.Error()), slog.Bool("everFetched", c.keys.Load() != nil))
		return err
	}
	c.keys.Store(&keys)
	c.logger.LogAttrs(ctx, slog.LevelInfo, "fetched JWKS", slog.Int("keys", len(keys)))
	return nil
}

func (c *jwksCache) read(ctx context.Context) (map[string]JWK, error) {
	if c.refused != nil {
		return nil, c.refused
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS: HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: read: %w", err)
	}
	return ParseJWKS(body)
}

// JWK is one verification key of a JWKS.
type JWK struct {
	// Key is an *rsa.PublicKey, an *ecdsa.PublicKey (P-256, P-384 or
	// P-521) or an ed25519.PublicKey.
	Key crypto.PublicKey
	// Alg is the JWK's alg member: when set, the only alg a token checked
	// with this key may have; empty, any alg of the key's type (and, for
	// EC, its curve).
	Alg string
}

// jwk is one JSON Web Key (RFC 7517), the members slidegate uses.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// ParseJWKS parses a JSON Web Key Set into verification keys by kid. Keys
// whose use is not "sig" (when set), of unsupported types, or whose alg
// does not fit their type (an RSA key naming ES256, HS256 or none, say) are
// skipped; a set with no usable key is an error.
func ParseJWKS(body []byte) (map[string]JWK, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	keys := make(map[string]JWK, len(set.Keys))
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		key, err := k.publicKey()
		if err != nil {
			continue
		}
		if k.Alg != "" && !algFitsKey(k.Alg, key) {
			continue
		}
		keys[k.Kid] = JWK{Key: key, Alg: k.Alg}
	}
	if len(keys) == 0 {
		return nil, errors.New("parse JWKS: no usable signing key")
	}
	return keys, nil
}

// algFitsKey reports whether a token of alg may be checked with key at
// all: RS* and PS* with RSA keys, ES256, ES384 and ES512 with P-256, P-384
// and P-521 keys, EdDSA (or its RFC 9864 name Ed25519) with Ed25519 keys.
func algFitsKey(alg string, key crypto.PublicKey) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		switch alg {
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			return true
		}
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return alg == "ES256"
		case elliptic.P384():
			return alg == "ES384"
		case elliptic.P521():
			return alg == "ES512"
		}
	case ed25519.PublicKey:
		return alg == "EdDSA" || alg == "Ed25519"
	}
	return false
}

// sameAlg reports whether a JWK's alg names the token's: the same name,
// or Ed25519 for EdDSA.
func sameAlg(keyAlg, tokenAlg string) bool {
	return keyAlg == tokenAlg || (keyAlg == "Ed25519" && tokenAlg == "EdDSA")
}

func (k jwk) publicKey() (any, error) {
	b64 := base64.RawURLEncoding
	switch k.Kty {
	case "RSA":
		n, err := b64.DecodeString(k.N)
		if err != nil {
			return nil, err
		}
		e, err := b64.DecodeString(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("bad RSA exponent")
		}
		exp := new(big.Int).SetBytes(e)
		if exp.Int64() < 3 || exp.Int64() > math.MaxInt32 || exp.Bit(0) == 0 {
			return nil, errors.New("bad RSA exponent")
		}
		modulus := new(big.Int).SetBytes(n)
		if modulus.BitLen() < minRSABits || modulus.Bit(0) == 0 {
			return nil, errors.New("RSA modulus too small or even")
		}
		return &rsa.PublicKey{N: modulus, E: int(exp.Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, errors.New("unsupported curve")
		}
		x, err := b64.DecodeString(k.X)
		if err != nil {
			return nil, err
		}
		y, err := b64.DecodeString(k.Y)
		if err != nil {
			return nil, err
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return nil, errors.New("bad EC coordinates")
		}
		point := append(append([]byte{4}, x...), y...)
		return ecdsa.ParseUncompressedPublicKey(curve, point)
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, errors.New("unsupported curve")
		}
		x, err := b64.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 key")
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, errors.New("unsupported key type")
}
