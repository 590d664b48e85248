package identity

import (
	"context"
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
	// clockLeeway tolerates clock skew on exp and nbf.
	clockLeeway = 10 * time.Second
	// maxSubjectLen bounds the sub claim that becomes an identity.
	maxSubjectLen = 512
	// maxJWKSBytes bounds a JWKS document.
	maxJWKSBytes = 1 << 20
	// jwksTimeout bounds one JWKS fetch (in the background: no request
	// waits for it).
	jwksTimeout = 3 * time.Second
	// minRSABits is the smallest RSA modulus a JWKS may hold.
	minRSABits = 2048
)

// ErrTokenInvalid is the error of every token that does not verify.
var ErrTokenInvalid = errors.New("token does not verify")

// VerifierConfig says how bearer tokens are verified.
type VerifierConfig struct {
	// Issuer and Audience are required claims (iss, aud); exp is required
	// too.
	Issuer   string
	Audience string
	// HS256Secret, when set, verifies HS256 tokens.
	HS256Secret []byte
	// HS256SecretPending says HS256 tokens are expected but the secret is
	// not known yet (it is still being read): they do not verify until
	// SetHS256Secret provides it.
	HS256SecretPending bool
	// JWKSURL, when set, verifies RS*, PS*, ES* and EdDSA tokens with the
	// keys it serves.
	JWKSURL string
	// HTTPClient fetches the JWKS; a client with a short timeout when nil.
	HTTPClient *http.Client
	// Now is the clock of exp, nbf and the JWKS refetch interval; time.Now
	// when nil.
	Now func() time.Time
	// Logger logs JWKS fetches.
	Logger *slog.Logger
}

// Verifier verifies bearer JWTs. It is safe for concurrent use.
type Verifier struct {
	issuer, audience string
	parser           *jwt.Parser
	hs256            atomic.Pointer[[]byte]
	jwks             *jwksCache
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
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(clockLeeway),
		jwt.WithTimeFunc(now),
	}
	v := &Verifier{issuer: cfg.Issuer, audience: cfg.Audience, parser: jwt.NewParser(opts...)}
	if len(cfg.HS256Secret) > 0 {
		v.SetHS256Secret(cfg.HS256Secret)
	}
	if cfg.JWKSURL != "" {
		client := cfg.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: jwksTimeout}
		}
		logger := cfg.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		c := &jwksCache{url: cfg.JWKSURL, client: client, logger: logger}
		c.fetches = &refresher{load: c.fetch, timeout: jwksTimeout, now: now}
		v.jwks = c
	}
	return v
}

// SetHS256Secret sets the HS256 secret of a verifier made with
// HS256SecretPending (or replaces the one it has). An empty secret is
// ignored.
func (v *Verifier) SetHS256Secret(secret []byte) {
	if len(secret) == 0 {
		return
	}
	s := append([]byte(nil), secret...)
	v.hs256.Store(&s)
}

// Prefetch fetches the JWKS, if one is configured, or joins the fetch in
// flight, and waits until it ends or ctx is done (the fetch then goes on in
// the background). It is for cold start: the only wait for a fetch a
// process ever does.
func (v *Verifier) Prefetch(ctx context.Context) error {
	if v == nil || v.jwks == nil {
		return nil
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

// Verify checks a token's signature, issuer, audience and expiry and
// returns its subject. Every failure wraps ErrTokenInvalid; the message
// never contains the token. It never waits for the network: a token whose
// kid is not in the JWKS already fetched does not verify, and starts a
// fetch in the background (at most one per JWKSRefetchInterval) for the
// tokens after it.
func (v *Verifier) Verify(_ context.Context, token string) (string, error) {
	if v.issuer == "" || v.audience == "" {
		return "", fmt.Errorf("%w: JWT_ISSUER and JWT_AUDIENCE are not configured", ErrTokenInvalid)
	}
	if len(token) > maxCredentialLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrTokenInvalid, maxCredentialLen)
	}
	keyfunc := func(t *jwt.Token) (any, error) {
		switch t.Method.(type) {
		case *jwt.SigningMethodHMAC:
			secret := v.hs256.Load()
			if secret == nil {
				return nil, errors.New("no HS256 secret")
			}
			return *secret, nil
		default:
			if v.jwks == nil {
				return nil, errors.New("no JWKS")
			}
			kid, _ := t.Header["kid"].(string)
			return v.jwks.lookup(kid)
		}
	}
	var claims jwt.RegisteredClaims
	if _, err := v.parser.ParseWithClaims(token, &claims, keyfunc); err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenInvalid, err)
	}
	if claims.Subject == "" || len(claims.Subject) > maxSubjectLen {
		return "", fmt.Errorf("%w: sub is empty or longer than %d bytes", ErrTokenInvalid, maxSubjectLen)
	}
	return claims.Subject, nil
}

// jwksCache holds the JWKS of one URL, fetched at cold start and again, in
// the background and at most every JWKSRefetchInterval, when a token names
// a kid it does not hold.
type jwksCache struct {
	url     string
	client  *http.Client
	logger  *slog.Logger
	keys    atomic.Pointer[map[string]any] // kid -> public key; nil until a fetch succeeds
	fetches *refresher
}

// lookup returns the key of kid ("" when the token names none: allowed only
// when the set holds exactly one key) from the set already fetched.
func (c *jwksCache) lookup(kid string) (any, error) {
	keys := c.keys.Load()
	if keys != nil {
		if key, ok := findKey(*keys, kid); ok {
			return key, nil
		}
	}
	c.fetches.trigger(JWKSRefetchInterval)
	if keys == nil {
		return nil, errors.New("JWKS not fetched yet")
	}
	return nil, errors.New("unknown kid")
}

func findKey(keys map[string]any, kid string) (any, bool) {
	if kid == "" {
		if len(keys) != 1 {
			return nil, false
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

func (c *jwksCache) read(ctx context.Context) (map[string]any, error) {
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

// jwk is one JSON Web Key (RFC 7517), the members slidegate uses.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// ParseJWKS parses a JSON Web Key Set into public keys by kid. Keys for
// encryption (use "enc") and of unsupported types are skipped; a set with
// no usable key is an error.
func ParseJWKS(body []byte) (map[string]any, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	keys := make(map[string]any, len(set.Keys))
	for _, k := range set.Keys {
		if k.Use == "enc" {
			continue
		}
		key, err := k.publicKey()
		if err != nil {
			continue
		}
		keys[k.Kid] = key
	}
	if len(keys) == 0 {
		return nil, errors.New("parse JWKS: no usable signing key")
	}
	return keys, nil
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
