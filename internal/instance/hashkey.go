package instance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/awsclients"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// errHashKeyUnavailable is why decisions find Redis unavailable while the
// identity hash key (RATE_LIMIT_HASH_KEY_SECRET_ARN) has not been read:
// counting under another hash would split every caller's count in two.
var errHashKeyUnavailable = errors.New("identity hash key not read (RATE_LIMIT_HASH_KEY_SECRET_ARN); Redis is not used until it is")

// hashKeySecret is the pacedSecret of RATE_LIMIT_HASH_KEY_SECRET_ARN: read
// at cold start and, after a failed read, again when a decision finds the
// key missing (that decision is itself decided without the key, as if
// Redis were unavailable). A key read is installed at once (install).
func (rt *Runtime) hashKeySecret(arn string, read func(context.Context, string) (string, error)) *pacedSecret {
	return &pacedSecret{
		arn:      arn,
		read:     read,
		interval: retryInterval(rt.secretRetryInterval),
		use: func(secret string) error {
			if len(secret) < identity.MinHashKeyLen {
				return fmt.Errorf("read secret %s: %d bytes; want at least %d", arn, len(secret), identity.MinHashKeyLen)
			}
			return rt.installKey([]byte(secret))
		},
		logger:    rt.logger,
		failedLog: "read RATE_LIMIT_HASH_KEY_SECRET_ARN failed; decisions behave as if Redis were unavailable (fail-open routes use the local fallback limit, fail-closed routes fail) until a later read succeeds",
		readLog:   "read RATE_LIMIT_HASH_KEY_SECRET_ARN: identities are hashed with its key and decided on Redis",
	}
}

// newGate is the gate deciding on client with identities hashed with
// key (none: plain SHA-256), and its Limiter.
func (rt *Runtime) newGate(client redis.UniversalClient, key []byte) (*ratelimit.Gate, *ratelimit.Limiter, error) {
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{
		KeyPrefix:       rt.cfg.KeyPrefix,
		Timeout:         rt.cfg.Redis.Timeout,
		IdentityHashKey: key,
		Controls:        true,
	})
	if err != nil {
		return nil, nil, err
	}
	return ratelimit.NewGate(limiter, ratelimit.GateOptions{
		FallbackInstances:    rt.cfg.FallbackInstances,
		OnBreakerStateChange: rt.observer.BreakerChanged,
	}), limiter, nil
}

// readyGate is the gate deciding on the runtime's Redis client with
// identities hashed with hasher's key (a zero hasher: plain SHA-256).
func (rt *Runtime) readyGate(hasher identity.Hasher) (*hashedGate, error) {
	gate, limiter, err := rt.newGate(rt.client, hasher.Key())
	if err != nil {
		return nil, err
	}
	return &hashedGate{gate: gate, hasher: hasher, ready: true,
		controls: controls.NewNetworkControlCache(limiter.Controls(), controls.Propagation)}, nil
}

// installKey makes decisions use key, on the runtime's Redis client.
func (rt *Runtime) installKey(key []byte) error {
	hasher, err := identity.NewHasher(key)
	if err != nil {
		return err
	}
	g, err := rt.readyGate(hasher)
	if err != nil {
		return err
	}
	rt.hashed.Store(g)
	return nil
}

// pendingGate is the gate of a runtime whose identity hash key is
// configured but not read: every decision finds Redis unavailable
// (errHashKeyUnavailable), so fail-open routes use the local fallback
// limit and fail-closed routes fail, and nothing reaches Redis. The
// fallback's in-memory counts are keyed with a random per-process key.
func (rt *Runtime) pendingGate() (*hashedGate, error) {
	key := make([]byte, identity.MinHashKeyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("random fallback hash key: %w", err)
	}
	gate, _, err := rt.newGate(failingClient("identity-hash-key-unavailable:0", errHashKeyUnavailable), key)
	if err != nil {
		return nil, err
	}
	return &hashedGate{gate: gate}, nil
}

// currentGate is the gate decisions use now; while the key is missing it
// starts a paced re-read of the secret.
func (rt *Runtime) currentGate(ctx context.Context) *hashedGate {
	g := rt.hashed.Load()
	if !g.ready && rt.hashKey != nil {
		rt.hashKey.start(ctx)
	}
	return g
}

// setUpHashKey installs the gate decisions use, with the identity hash
// key: RATE_LIMIT_HASH_KEY at once; RATE_LIMIT_HASH_KEY_SECRET_ARN read as
// a cold-start load (until it is read, and if the read fails until a
// later one succeeds, decisions behave as if Redis were unavailable);
// neither: unkeyed, with a warning.
func (rt *Runtime) setUpHashKey(ctx context.Context, aws *awsclients.Clients, loads *coldStartLoads) error {
	hk := rt.cfg.HashKey
	if !hk.Configured() {
		g, err := rt.readyGate(identity.Hasher{})
		if err != nil {
			return err
		}
		rt.hashed.Store(g)
		rt.logger.LogAttrs(ctx, slog.LevelWarn, "no identity hash key (RATE_LIMIT_HASH_KEY_SECRET_ARN or RATE_LIMIT_HASH_KEY): identities are hashed with plain SHA-256, and hashed IP addresses in logs, principal ids and Redis keys can be reversed by hashing the address space")
		return nil
	}
	if len(hk.Key) > 0 {
		return rt.installKey(hk.Key)
	}
	pending, err := rt.pendingGate()
	if err != nil {
		return err
	}
	rt.hashed.Store(pending)
	if hk.SecretARN == "" {
		// Refused: a key was meant but is unusable (logged with the
		// configuration errors); nothing will ever make it usable.
		return nil
	}
	s := rt.hashKeySecret(hk.SecretARN, aws.ReadSecret)
	rt.hashKey = s
	loads.start("RATE_LIMIT_HASH_KEY_SECRET_ARN", func(ctx context.Context) {
		if r, _, _ := s.start(ctx); r != nil {
			<-r.done
		}
	})
	return nil
}

// identityHashMode says, for the cold-start log line, how identities are
// hashed: "hmac", "pending" (a key is configured but not read yet) or
// "sha256" (no key).
func (rt *Runtime) identityHashMode() string {
	switch g := rt.hashed.Load(); {
	case !g.ready:
		return "pending"
	case g.hasher.Keyed():
		return "hmac"
	default:
		return "sha256"
	}
}
