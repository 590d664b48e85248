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
	"math/big"
	"net/http"
	"sync"
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
	// jwksTimeout bounds one JWKS fetch.
	jwksTimeout = 3 * time.Second
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
	cfg    VerifierConfig
	parser *jwt.Parser
	jwks   *jwksCache
}

// NewVerifier returns a verifier, or nil when cfg has no key source (bearer
// tokens then earn nothing). It does not fetch the JWKS; the first token
// (or Prefetch) does.
func NewVerifier(cfg VerifierConfig) *Verifier {
	if len(cfg.HS256Secret) == 0 && cfg.JWKSURL == "" {
		return nil
	}
	var methods []string
	if len(cfg.HS256Secret) > 0 {
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
	v := &Verifier{cfg: cfg, parser: jwt.NewParser(opts...)}
	if cfg.JWKSURL != "" {
		client := cfg.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: jwksTimeout}
		}
		logger := cfg.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		v.jwks = &jwksCache{url: cfg.JWKSURL, client: client, now: now, logger: logger}
	}
	return v
}

// Prefetch fetches the JWKS, if one is configured (at cold start).
func (v *Verifier) Prefetch(ctx context.Context) error {
	if v == nil || v.jwks == nil {
		return nil
	}
	_, err := v.jwks.lookup(ctx, "", true)
	return err
}

// Verify checks a token's signature, issuer, audience and expiry and
// returns its subject. Every failure wraps ErrTokenInvalid; the message
// never contains the token.
func (v *Verifier) Verify(ctx context.Context, token string) (string, error) {
	if v.cfg.Issuer == "" || v.cfg.Audience == "" {
		return "", fmt.Errorf("%w: JWT_ISSUER and JWT_AUDIENCE are not configured", ErrTokenInvalid)
	}
	if len(token) > maxCredentialLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrTokenInvalid, maxCredentialLen)
	}
	keyfunc := func(t *jwt.Token) (any, error) {
		switch t.Method.(type) {
		case *jwt.SigningMethodHMAC:
			if len(v.cfg.HS256Secret) == 0 {
				return nil, errors.New("no HS256 secret")
			}
			return v.cfg.HS256Secret, nil
		default:
			if v.jwks == nil {
				return nil, errors.New("no JWKS")
			}
			kid, _ := t.Header["kid"].(string)
			return v.jwks.lookup(ctx, kid, false)
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

// jwksCache holds the JWKS of one URL, fetched once per process and again
// (at most every JWKSRefetchInterval) when a token names an unknown kid.
type jwksCache struct {
	url    string
	client *http.Client
	now    func() time.Time
	logger *slog.Logger

	mu        sync.Mutex
	keys      map[string]any // kid -> public key
	fetchedAt time.Time
	fetched   bool
}

// lookup returns the key of kid ("" when the token names none: allowed only
// when the set holds exactly one key). force fetches regardless of the
// refetch interval.
func (c *jwksCache) lookup(ctx context.Context, kid string, force bool) (any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if key, ok := c.findLocked(kid); ok && !force {
		return key, nil
	}
	if force || !c.fetched || c.now().Sub(c.fetchedAt) >= JWKSRefetchInterval {
		c.fetched, c.fetchedAt = true, c.now()
		keys, err := c.fetch(ctx)
		if err != nil {
			c.logger.LogAttrs(ctx, slog.LevelError, "fetch JWKS failed", slog.String("error", err.Error()))
			if force {
				return nil, err
			}
		} else {
			c.keys = keys
			c.logger.LogAttrs(ctx, slog.LevelInfo, "fetched JWKS", slog.Int("keys", len(keys)))
		}
	}
	if key, ok := c.findLocked(kid); ok {
		return key, nil
	}
	if force {
		return nil, nil
	}
	return nil, errors.New("unknown kid")
}

func (c *jwksCache) findLocked(kid string) (any, bool) {
	if kid == "" {
		if len(c.keys) != 1 {
			return nil, false
		}
		for _, k := range c.keys {
			return k, true
		}
	}
	k, ok := c.keys[kid]
	return k, ok
}

func (c *jwksCache) fetch(ctx context.Context) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksTimeout)
	defer cancel()
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
		if len(n) < 256 || !exp.IsInt64() || exp.Int64() < 3 {
			return nil, errors.New("RSA key too small or bad exponent")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp.Int64())}, nil
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
