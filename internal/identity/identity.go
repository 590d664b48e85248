// Package identity decides who a request is counted against: a known API
// key (tier org), a verified JWT bearer (tier user), or the source IP
// (tier anonymous). It knows HTTP headers and credentials, not API Gateway
// event shapes and not Redis.
package identity

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
)

// Tier names: a Caller's tier, and the policy names of the per-caller
// limits (internal/config), declared here once.
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
	// Identity is "ip:<source address or IPv6 prefix>" (SourceIdentity),
	// "sub:<jwt sub>" or "key:<sha256 hex>".
	Identity string
	// APIKey is the raw key of an org caller; never logged.
	APIKey string
	// Plan is the caller's plan (NormalizePlan's form), "" for none: from
	// its API key (API_KEY_HASHES "hash:plan", or the key's usage plan) or
	// its verified JWT's plan claim. Whether the plan is configured is
	// for the caller of Resolve to decide.
	Plan string
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
	// InvalidSource is true when the source address did not parse: the
	// anonymous caller is then the shared "ip:invalid" (SourceIdentity).
	InvalidSource bool
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

// Resolve is ResolveForAPI for a request whose REST API id is unknown (API
// keys of every API of the account are trusted, see GatewayKeys.Lookup),
// with IPv6 sources counted per DefaultIPv6Prefix.
func (r *Resolver) Resolve(ctx context.Context, headers map[string]string, sourceIP string) Resolution {
	return r.ResolveForAPI(ctx, "", "", headers, sourceIP, DefaultIPv6Prefix)
}

// ResolveForAPI decides who a request to the stage stage of the REST API
// apiID (requestContext.apiId and requestContext.stage) is counted against. headers must have lower-case
// names. sourceIP is the address API Gateway saw; X-Forwarded-For is never
// consulted; the anonymous identity is SourceIdentity(sourceIP,
// ipv6Prefix). It never waits for the network: credentials are checked
// against the keys and JWKS already loaded.
//
// Order: an x-api-key header, when present, decides alone (known on the stage:
// org; unknown: unauthorized); otherwise an Authorization bearer token
// (verifies: user; does not: unauthorized; no JWT configuration: ignored);
// otherwise anonymous. An org caller's plan is its key's (when keys is a
// KeyPlanner), a user's its token's plan claim (VerifierConfig.PlanClaim).
func (r *Resolver) ResolveForAPI(ctx context.Context, apiID, stage string, headers map[string]string, sourceIP string, ipv6Prefix int) Resolution {
	res := r.resolve(ctx, apiID, stage, headers, sourceIP, ipv6Prefix)
	if res.Caller.Tier == TierAnonymous && res.Caller.Identity == KindIP+InvalidSource {
		res.InvalidSource = true
	}
	return res
}

func (r *Resolver) resolve(ctx context.Context, apiID, stage string, headers map[string]string, sourceIP string, ipv6Prefix int) Resolution {
	source, _ := SourceIdentity(sourceIP, ipv6Prefix)
	anonymous := Caller{Tier: TierAnonymous, Identity: source}

	if key := strings.TrimSpace(headers["x-api-key"]); key != "" {
		if len(key) > maxCredentialLen || r.keys == nil {
			return Resolution{Caller: anonymous, Unauthorized: true, Reason: "unknown api key"}
		}
		hash := KeyHash(key)
		switch r.keys.Lookup(ctx, apiID, stage, hash) {
		case KeyKnown:
			c := Caller{Tier: TierOrg, Identity: KindKey + hash, APIKey: key}
			if kp, ok := r.keys.(KeyPlanner); ok {
				c.Plan = kp.KeyPlan(ctx, apiID, stage, hash)
			}
			return Resolution{Caller: c}
		case KeyUnverifiable:
			// The key list could not be read: the key is neither trusted
			// nor rejected, and the caller is counted as anonymous.
			return Resolution{Caller: anonymous, Reason: "api keys unavailable"}
		default:
			return Resolution{Caller: anonymous, Unauthorized: true, Reason: "unknown api key"}
		}
	}

	if token, ok := bearerToken(headers["authorization"]); ok && r.verifier != nil {
		claims, err := r.verifier.VerifyClaims(ctx, token)
		if err != nil {
			return Resolution{Caller: anonymous, Unauthorized: true, Reason: "bearer token: " + err.Error()}
		}
		return Resolution{Caller: Caller{Tier: TierUser, Identity: KindSubject + claims.Subject, Plan: claims.Plan}}
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

// MinHashKeyLen is the shortest identity hash key accepted, in bytes.
const MinHashKeyLen = 32

// Hasher hashes identities for logs, principal ids and (through
// pkg/ratelimit's Options.IdentityHashKey, with the same key) Redis keys.
// With a key it is HMAC-SHA-256: without the key, a hashed IP address
// cannot be found by hashing the address space. The zero value has no key
// and is plain SHA-256 (Hash).
type Hasher struct {
	key []byte
}

// NewHasher returns a hasher keyed with key, which must be at least
// MinHashKeyLen bytes. The key is copied.
func NewHasher(key []byte) (Hasher, error) {
	if len(key) < MinHashKeyLen {
		return Hasher{}, fmt.Errorf("identity hash key: %d bytes; want at least %d", len(key), MinHashKeyLen)
	}
	return Hasher{key: bytes.Clone(key)}, nil
}

// Keyed reports whether the hasher has a key.
func (h Hasher) Keyed() bool { return len(h.key) > 0 }

// Key returns the hasher's key (nil without one), for
// ratelimit.Options.IdentityHashKey. Callers must not modify it.
func (h Hasher) Key() []byte { return h.key }

// Hash is the form of an identity that may appear in logs and principal
// ids: 128 bits of its HMAC-SHA-256 (SHA-256 without a key), hex. They are
// the same 128 bits as the identity's Redis hash tag, in another encoding.
func (h Hasher) Hash(identity string) string {
	var sum [sha256.Size]byte
	if len(h.key) > 0 {
		mac := hmac.New(sha256.New, h.key)
		mac.Write([]byte(identity))
		mac.Sum(sum[:0])
	} else {
		sum = sha256.Sum256([]byte(identity))
	}
	return hex.EncodeToString(sum[:16])
}

// Hash is an identity's unkeyed hash: Hasher{}.Hash. It is not reversible
// for keys and tokens; IP addresses can be found by hashing the address
// space, which is why deployments key the hash (NewHasher).
func Hash(identity string) string {
	return Hasher{}.Hash(identity)
}
