package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/edge"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// errHashKeyUnavailable is why decisions find Redis unavailable while the
// identity hash key (RATE_LIMIT_HASH_KEY_SECRET_ARN) has not been read:
// counting under another hash would split every caller's count in two.
var errHashKeyUnavailable = errors.New("identity hash key not read (RATE_LIMIT_HASH_KEY_SECRET_ARN); Redis is not used until it is")

// hashedGate is a gate together with the hasher its limiter's keys are
// made with.
type hashedGate struct {
	gate   *ratelimit.Gate
	hasher identity.Hasher
	// ready is false while a configured key has not been read: gate then
	// decides as if Redis were unavailable and hasher is not used.
	ready bool
}

// hashOf is the identity's hash for logs and principal ids, or
// edge.IdentityHashUnavailable.
func (g *hashedGate) hashOf(id string) string {
	if !g.ready {
		return edge.IdentityHashUnavailable
	}
	return g.hasher.Hash(id)
}

// hashKeySecret reads the identity hash key of RATE_LIMIT_HASH_KEY_SECRET_ARN
// after its cold-start read failed: a decision that finds the key missing
// starts a read in the background, unless one is under way or the last one
// ended less than interval ago, and is itself decided without the key (as
// if Redis were unavailable). It is safe for concurrent use.
type hashKeySecret struct {
	arn      string
	read     func(ctx context.Context, arn string) (string, error)
	interval time.Duration
	logger   *slog.Logger
	// install builds and installs the gate of a key that was read.
	install func(key []byte) error

	mu       sync.Mutex
	done     bool
	reading  bool
	failedAt time.Time
}

// due starts a read in the background if one may start now.
func (s *hashKeySecret) due(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.reading {
		return
	}
	if since := time.Since(s.failedAt); !s.failedAt.IsZero() && since >= 0 && since < s.interval {
		return
	}
	s.reading = true
	go s.readOnce(context.WithoutCancel(ctx))
}

// readOnce reads the secret (within secretReadTimeout) and installs the
// key, or notes the failure; either is logged, never the key.
func (s *hashKeySecret) readOnce(ctx context.Context) {
	err := s.load(ctx)
	s.mu.Lock()
	s.reading = false
	if err == nil {
		s.done = true
	} else {
		s.failedAt = time.Now()
	}
	s.mu.Unlock()
	if err != nil {
		s.logger.LogAttrs(ctx, slog.LevelError, "read RATE_LIMIT_HASH_KEY_SECRET_ARN failed; decisions behave as if Redis were unavailable (fail-open routes use the local fallback limit, fail-closed routes fail) until a later read succeeds",
			slog.String("error", err.Error()),
			slog.Duration("retryInterval", s.interval))
		return
	}
	s.logger.LogAttrs(ctx, slog.LevelInfo, "read RATE_LIMIT_HASH_KEY_SECRET_ARN: identities are hashed with its key and decided on Redis")
}

func (s *hashKeySecret) load(ctx context.Context) error {
	secret, err := s.read(ctx, s.arn)
	if err != nil {
		return err
	}
	if len(secret) < identity.MinHashKeyLen {
		return fmt.Errorf("read secret %s: %d bytes; want at least %d", s.arn, len(secret), identity.MinHashKeyLen)
	}
	return s.install([]byte(secret))
}

// newGate is the gate deciding on the runtime's Redis client with
// identities hashed with key (none: plain SHA-256).
func (rt *Runtime) newGate(client redis.UniversalClient, key []byte) (*ratelimit.Gate, error) {
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{
		KeyPrefix:       rt.cfg.KeyPrefix,
		Timeout:         rt.cfg.Redis.Timeout,
		IdentityHashKey: key,
	})
	if err != nil {
		return nil, err
	}
	return ratelimit.NewGate(limiter, ratelimit.GateOptions{
		FallbackInstances:    rt.cfg.FallbackInstances,
		OnBreakerStateChange: rt.observer.BreakerChanged,
	}), nil
}

// installKey makes decisions use key, on the runtime's Redis client.
func (rt *Runtime) installKey(key []byte) error {
	hasher, err := identity.NewHasher(key)
	if err != nil {
		return err
	}
	gate, err := rt.newGate(rt.client, hasher.Key())
	if err != nil {
		return err
	}
	rt.hashed.Store(&hashedGate{gate: gate, hasher: hasher, ready: true})
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
	gate, err := rt.newGate(failingClient("identity-hash-key-unavailable:0", errHashKeyUnavailable), key)
	if err != nil {
		return nil, err
	}
	return &hashedGate{gate: gate}, nil
}

// currentGate is the gate decisions use now; while the key is missing it
// starts a paced re-read of the secret.
func (rt *Runtime) currentGate(ctx context.Context) *hashedGate {
	g := rt.hashed.Load()
	if !g.ready && rt.hashKeySecret != nil {
		rt.hashKeySecret.due(ctx)
	}
	return g
}
