package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/iamauth"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// buildClient builds the Redis client from the configuration. Connections
// authenticate with IAM when REDIS_IAM_USER is set, otherwise with the
// AUTH token of REDIS_AUTH_SECRET_ARN, read within ctx (the cold-start
// deadline), if set. A missing credential is logged, not fatal: Redis then
// answers NOAUTH, which the failure policy handles.
func (rt *Runtime) buildClient(ctx context.Context, aws *awsClients) redis.UniversalClient {
	cc := rt.cfg.Redis
	if cc.URL == "" {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_URL is not set: every decision will find Redis unavailable (fail-open routes use the local fallback limit, fail-closed routes fail)")
		return unconfiguredClient()
	}
	// How connections authenticate, for the log: "iam", "secret", or
	// "default" (the URL's credentials, if it has any).
	auth := "default"
	switch arn := rt.cfg.RedisAuthSecretARN; {
	case rt.cfg.RedisIAM.Enabled():
		if arn != "" {
			rt.logger.LogAttrs(ctx, slog.LevelWarn, "REDIS_IAM_USER and REDIS_AUTH_SECRET_ARN are both set: connections authenticate with IAM and the secret is not read")
		}
		if withIAM, ok := rt.withIAMAuth(ctx, cc, aws); ok {
			cc, auth = withIAM, "iam"
		}
	case arn != "":
		secret, err := aws.readSecret(ctx, arn)
		if err != nil {
			// Without the token every command fails with NOAUTH; that is
			// an outage the failure policy handles, and the log says why.
			rt.logger.LogAttrs(ctx, slog.LevelError, "read REDIS_AUTH_SECRET_ARN failed; Redis commands will fail with NOAUTH",
				slog.String("error", err.Error()))
		} else {
			cc.Password, auth = secret, "secret"
		}
	}
	client, err := ratelimit.NewClient(cc)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_URL does not parse: every decision will find Redis unavailable", slog.String("error", err.Error()))
		return unconfiguredClient()
	}
	rt.logger.LogAttrs(ctx, slog.LevelInfo, "redis client configured",
		slog.String("auth", auth),
		slog.Bool("tls", strings.HasPrefix(strings.ToLower(cc.URL), "rediss://")),
		slog.Bool("privateCA", cc.RootCAs != nil))
	return client
}

// withIAMAuth returns cc set up to authenticate every new connection with
// an ElastiCache IAM authentication token signed with the default AWS
// configuration's credentials (the Lambda role's) for its region. It
// reports false, having logged why, when it cannot be set up.
func (rt *Runtime) withIAMAuth(ctx context.Context, cc ratelimit.ClientConfig, aws *awsClients) (ratelimit.ClientConfig, bool) {
	iam := rt.cfg.RedisIAM
	creds, region, err := aws.credentials(ctx)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_IAM_USER: no AWS credentials to sign IAM auth tokens with; Redis commands will fail with NOAUTH",
			slog.String("error", err.Error()))
		return cc, false
	}
	provider, err := iamauth.NewProvider(iamauth.Config{
		UserID:     iam.User,
		CacheName:  iam.CacheName,
		Serverless: iam.Serverless,
		Region:     region,
	}, creds, iamauth.Options{})
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_IAM_USER: IAM authentication cannot be set up (is AWS_REGION set?); Redis commands will fail with NOAUTH",
			slog.String("error", err.Error()))
		return cc, false
	}
	rt.logger.LogAttrs(ctx, slog.LevelInfo, "redis connections authenticate with IAM",
		slog.String("user", iam.User),
		slog.String("cache", iam.CacheName),
		slog.Bool("serverless", iam.Serverless),
		slog.String("region", region))
	return provider.Configure(cc), true
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
