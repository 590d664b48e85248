package app

import (
	"context"
	"errors"
	"log/slog"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// buildClient builds the Redis client from the configuration, reading the
// AUTH secret within ctx (the cold-start deadline).
func (rt *Runtime) buildClient(ctx context.Context, aws *awsClients) redis.UniversalClient {
	cc := rt.cfg.Redis
	if cc.URL == "" {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_URL is not set: every decision will find Redis unavailable (fail-open routes use the local fallback limit, fail-closed routes fail)")
		return unconfiguredClient()
	}
	if arn := rt.cfg.RedisAuthSecretARN; arn != "" {
		secret, err := aws.readSecret(ctx, arn)
		if err != nil {
			// Without the token every command fails with NOAUTH; that is
			// an outage the failure policy handles, and the log says why.
			rt.logger.LogAttrs(ctx, slog.LevelError, "read REDIS_AUTH_SECRET_ARN failed; Redis commands will fail with NOAUTH",
				slog.String("error", err.Error()))
		} else {
			cc.Password = secret
		}
	}
	client, err := ratelimit.NewClient(cc)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_URL does not parse: every decision will find Redis unavailable", slog.String("error", err.Error()))
		return unconfiguredClient()
	}
	return client
}

// errRedisUnconfigured is what every command of an unconfigured client
// fails with.
var errRedisUnconfigured = errors.New("REDIS_URL is not set or does not parse")

// unconfiguredClient is a client whose every command fails at dial, so that
// a function without Redis still answers by its failure policy.
func unconfiguredClient() redis.UniversalClient {
	return redis.NewClient(&redis.Options{
		Addr:       "redis-unconfigured:0",
		MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errRedisUnconfigured
		},
		DialerRetries:         1,
		DisableIdentity:       true,
		Protocol:              2,
		ContextTimeoutEnabled: true,
	})
}
