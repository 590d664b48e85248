// Package identity decides who a request is counted against: a known API
// key (tier org), a verified JWT bearer (tier user), or the source IP
// (tier anonymous). It knows HTTP headers and credentials, not API Gateway
// event shapes and not Redis.
package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
)

// Tier names (the same strings as internal/config and internal/app).
const (
	TierAnonymous = "anonymous"
	TierUser      = "user"
	TierOrg       = "org"
)

// Identity kinds, the prefixes of Caller.Identity.
const (
	KindIP      = "ip:"
	KindSubject = "sub:"
	KindKey     = "key:"
)

// maxCredentialLen bounds the API keys and tokens that are looked at at
// all; anything longer cannot be a credential this service issued.
const maxCredentialLen = 8192

// Caller is who a request is counted against.
type Caller struct {
	// Tier is TierAnonymous, TierUser or TierOrg.
	Tier string
	// Identity is "ip:<source ip>", "sub:<jwt sub>" or "key:<sha256 hex>".
	Identity string
	// APIKey is the raw key of an org caller; never logged.
	APIKey string
}

// Resolution is the answer of Resolve.
type Resolution struct {
	// Caller is who is counted. For an unauthorized request it is the
	// anonymous caller of the source IP.
	Caller Caller
	// Unauthorized is true when the request presented an unknown API key or
	// a bearer token that does not verify.
	Unauthorized bool
	// Reason says, for the log, why a presented credential earned nothing
	// (it never contains the credential).
	Reason string
}

// Resolver resolves callers. It is safe for concurrent use.
type Resolver struct {
	keys     KeyStore
	verifier *Verifier
	logger   *slog.Logger
}

// NewResolver returns a resolver. keys may be nil (no API key is known,
// every presented key is unauthorized); verifier may be nil (bearer tokens
// earn nothing and are ignored).
func NewResolver(keys KeyStore, verifier *Verifier, logger *slog.Logger) *Resolver {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Resolver{keys: keys, verifier: verifier, logger: logger}
}

// Resolve is ResolveForAPI for a request whose REST API id is unknown: API
// keys of every API of the account are trusted (see GatewayKeys.Lookup).
func (r *Resolver) Resolve(ctx context.Context, headers map[string]string, sourceIP string) Resolution {
	return r.ResolveForAPI(ctx, "", "", headers, sourceIP)
}

// ResolveForAPI decides who a request to the stage stage of the REST API
// apiID (requestContext.apiId and requestContext.stage) is counted against. headers must have lower-case
// names. sourceIP is the address API Gateway saw; X-Forwarded-For is never
// consulted. It never waits for the network: credentials are checked
// against the keys and JWKS already loaded.
//
// Order: an x-api-key header, when present, decides alone (known on the stage:
// org; unknown: unauthorized); otherwise an Authorization bearer token
// (verifies: user; does not: unauthorized; no JWT configuration: ignored);
// otherwise anonymous.
func (r *Resolver) ResolveForAPI(ctx context.Context, apiID, stage string, headers map[string]string, sourceIP string) Resolution {
	anonymous := Caller{Tier: TierAnonymous, Identity: KindIP + sourceIP}

	if key := strings.TrimSpace(headers["x-api-key"]); key != "" {
		if len(key) > maxCredentialLen || r.keys == nil {
			return Resolution{Caller: anonymous, Unauthorized: true, Reason: "unknown api key"}
		}
		hash := KeyHash(key)
		switch r.keys.Lookup(ctx, apiID, stage, hash) {
		case KeyKnown:
			return Resolution{Caller: Caller{Tier: TierOrg, Identity: KindKey + hash, APIKey: key}}
		case KeyUnverifiable:
			// The key list could not be read: the key is neither trusted
			// nor rejected, and the caller is counted as anonymous.
			return Resolution{Caller: anonymous, Reason: "api keys unavailable"}
		default:
			return Resolution{Caller: anonymous, Unauthorized: true, Reason: "unknown api key"}
		}
	}

	if token, ok := bearerToken(headers["authorization"]); ok && r.verifier != nil {
		sub, err := r.verifier.Verify(ctx, token)
		if err != nil {
			return Resolution{Caller: anonymous, Unauthorized: true, Reason: "bearer token: " + err.Error()}
		}
		return Resolution{Caller: Caller{Tier: TierUser, Identity: KindSubject + sub}}
	}
	return Resolution{Caller: anonymous}
}

// bearerToken extracts the token of "Bearer <token>" (scheme
// case-insensitive).
func bearerToken(h string) (string, bool) {
	h = strings.TrimSpace(h)
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	return strings.TrimSpace(h[len(scheme):]), true
}

// KeyHash is an API key's SHA-256, lower-case hex: the form of
// API_KEY_HASHES and of an org caller's identity.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Hash is the form of an identity that may appear in logs and principal
// ids: 128 bits of its SHA-256, hex. It is not reversible for keys and
// tokens; IP addresses could be found by hashing the address space, which
// is why it is not used as a secret.
func Hash(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:16])
}
