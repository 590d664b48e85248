// Package operator is the functions' Redis as an operator's tool (the
// slidegate command) reaches it: the same Redis, TLS, AUTH and IAM
// settings, key prefix and identity hash key as the functions of a
// configuration, so that the tool reads and resets the very keys they
// decide with. It is not on a request's path.
package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/awsclients"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// Options are the dependencies of Connect. The zero value reads secrets
// with the AWS configuration of the process's environment.
type Options struct {
	// Timeout bounds connecting and each Redis command; it replaces
	// REDIS_TIMEOUT, a decision's budget, which is too short for an
	// operator across a VPN. DefaultTimeout when zero.
	Timeout time.Duration
	// AWSConfig loads the AWS configuration secrets are read and IAM
	// tokens signed with; the process's environment when nil
	// (awsclients.FromEnvironment, what the operator function has). The
	// slidegate command gives the SDK's full loader (sdkconfig.Load), for
	// an operator's profiles and single sign-on.
	AWSConfig awsclients.Loader
	// SecretsManager reads REDIS_AUTH_SECRET_ARN and
	// RATE_LIMIT_HASH_KEY_SECRET_ARN; the aws-sdk-go-v2 client of
	// AWSConfig when nil.
	SecretsManager awsclients.SecretReader
	// Logger receives the IAM token provider's records; none when nil.
	Logger *slog.Logger
}

// DefaultTimeout is Options.Timeout when zero.
const DefaultTimeout = 5 * time.Second

// Conn is the functions' view of Redis for an operator's tool: a Limiter
// on the same Redis, reached with the same TLS, AUTH and IAM settings,
// under the same key prefix and identity hash key as the functions of a
// configuration.
type Conn struct {
	// Limiter decides and resets like the functions' own, and holds the
	// live controls (Limiter.Controls).
	Limiter *ratelimit.Limiter
	// Gate peeks through Limiter, within its timeout, with no deny cache:
	// every peek asks Redis (one Redis cannot answer comes back Degraded,
	// with its Cause).
	Gate *ratelimit.Gate
	// Keyed is true when identities are hashed with a key (HMAC-SHA-256),
	// false for plain SHA-256 (no key configured).
	Keyed bool
	// Auth is how connections authenticate: "iam", "secret" (the AUTH token
	// of REDIS_AUTH_SECRET_ARN) or "url" (the URL's credentials, if any).
	Auth string

	client redis.UniversalClient
	hasher identity.Hasher
}

// Hash is an identity's hash as the functions log it and put it in
// principal ids: the same 128 bits as its Redis hash tag. An identity
// given as its hash (identity.KindHash) is that hash.
func (o *Conn) Hash(id string) string {
	if h, ok := strings.CutPrefix(id, identity.KindHash); ok {
		return h
	}
	return o.hasher.Hash(id)
}

// errRedisUnreachable is what Connect's error wraps when Redis does not
// answer PING.
var errRedisUnreachable = errors.New("cannot reach Redis")

// Connect connects to the Redis of cfg as the functions do and checks
// that it answers. Unlike a function, which starts anyway and fails open,
// it fails with an error naming what is missing: no REDIS_URL, an identity
// hash key that cannot be read or is refused (the functions would count
// under keys the tool cannot find), an AUTH secret or IAM credentials that
// cannot be had, or a Redis that does not answer (errRedisUnreachable).
// The error never holds a password or a key.
func Connect(ctx context.Context, cfg *config.Config, opts Options) (*Conn, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Redis.URL == "" {
		return nil, errors.New("REDIS_URL is not set: give the URL of the Redis the functions use")
	}
	aws := awsclients.New(opts.AWSConfig, nil, opts.SecretsManager)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	key, err := hashKey(ctx, cfg.HashKey, aws)
	if err != nil {
		return nil, err
	}
	op := &Conn{Keyed: len(key) > 0, Auth: "url"}
	if op.Keyed {
		if op.hasher, err = identity.NewHasher(key); err != nil {
			return nil, err
		}
	}
	cc := cfg.Redis
	cc.Timeout = timeout
	switch {
	case cfg.RedisIAM.Enabled():
		if cc, _, err = aws.RedisIAM(ctx, cc, cfg.RedisIAM, logger); err != nil {
			return nil, fmt.Errorf("REDIS_IAM_USER: %w", err)
		}
		op.Auth = "iam"
	case cfg.RedisAuthSecretARN != "":
		if cc.Password, err = aws.ReadSecret(ctx, cfg.RedisAuthSecretARN); err != nil {
			return nil, fmt.Errorf("REDIS_AUTH_SECRET_ARN: %w", err)
		}
		op.Auth = "secret"
	}
	if op.client, err = redisclient.New(cc); err != nil {
		return nil, err
	}
	op.Limiter, err = ratelimit.NewLimiter(op.client, ratelimit.Options{KeyPrefix: cfg.KeyPrefix, Timeout: timeout, IdentityHashKey: key,
		// The operator names callers by the hash the logs print
		// (identity.KindHash); this limiter decides no request.
		HashedIdentities: true})
	if err != nil {
		op.Close()
		return nil, err
	}
	op.Gate = ratelimit.NewGate(op.Limiter, ratelimit.GateOptions{DenyCacheDisabled: true})
	if err := op.ping(ctx); err != nil {
		op.Close()
		return nil, fmt.Errorf("%w at %s: %w", errRedisUnreachable, redisHost(cc.URL), err)
	}
	return op, nil
}

// ping checks that Redis answers: every master of a cluster.
func (o *Conn) ping(ctx context.Context) error {
	if cluster, ok := o.client.(*redis.ClusterClient); ok {
		return cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := node.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("node %s: %w", node.Options().Addr, err)
			}
			return nil
		})
	}
	return o.client.Ping(ctx).Err()
}

// Close closes the Redis client.
func (o *Conn) Close() error {
	if err := o.client.Close(); err != nil {
		return fmt.Errorf("close redis client: %w", err)
	}
	return nil
}

// hashKey is the identity hash key the functions of hk hash with,
// nil for none.
func hashKey(ctx context.Context, hk config.HashKey, aws *awsclients.Clients) ([]byte, error) {
	switch {
	case hk.SecretARN != "":
		secret, err := aws.ReadSecret(ctx, hk.SecretARN)
		if err != nil {
			return nil, fmt.Errorf("RATE_LIMIT_HASH_KEY_SECRET_ARN: %w", err)
		}
		if len(secret) < identity.MinHashKeyLen {
			return nil, fmt.Errorf("RATE_LIMIT_HASH_KEY_SECRET_ARN: the secret holds %d bytes, want at least %d; the functions do not use Redis with it", len(secret), identity.MinHashKeyLen)
		}
		return []byte(secret), nil
	case hk.Refused:
		return nil, fmt.Errorf("RATE_LIMIT_HASH_KEY is shorter than %d bytes; the functions do not use Redis with it", identity.MinHashKeyLen)
	}
	return hk.Key, nil
}

// redisHost is the host and port of a Redis URL, for messages: never its
// credentials.
func redisHost(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "REDIS_URL"
	}
	return u.Host
}
