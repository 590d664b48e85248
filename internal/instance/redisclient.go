package instance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/awsclients"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// buildClient builds the Redis client from the configuration. Connections
// authenticate with IAM when REDIS_IAM_USER is set, otherwise with the
// AUTH token of REDIS_AUTH_SECRET_ARN, if set, read within ctx (the
// cold-start deadline). A token that could not be read then (throttled, no
// answer in time) is read again when a connection needs it (authSecret):
// until it is, connections fail, which the failure policy handles. A
// missing credential is logged, not fatal.
func (rt *Runtime) buildClient(ctx context.Context, aws *awsclients.Clients) redis.UniversalClient {
	cc := rt.cfg.Redis
	if cc.URL == "" {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_URL is not set: every decision will find Redis unavailable (fail-open routes use the local fallback limit, fail-closed routes fail)")
		return failingClient("redis-unconfigured:0", errRedisUnconfigured)
	}
	// How connections authenticate, for the log: "iam", "secret",
	// "secret-pending" (the secret is read again when a connection needs
	// it), or "default" (the URL's credentials, if it has any).
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
		secret, err := aws.ReadSecret(ctx, arn)
		if err != nil {
			// Without the token no connection opens; that is an outage
			// the failure policy handles, and the log says why. It ends
			// when a later read succeeds.
			lazy := newAuthSecret(arn, cc.URL, rt.secretRetryInterval, aws, rt.logger)
			rt.logger.LogAttrs(ctx, slog.LevelError, "read REDIS_AUTH_SECRET_ARN failed; Redis connections fail until a later read succeeds (it is read again when a connection needs it, at most once per retryInterval)",
				slog.String("error", err.Error()),
				slog.Duration("retryInterval", lazy.secret.interval))
			cc.CredentialsProvider, auth = lazy.credentials, "secret-pending"
		} else {
			cc.Password, auth = secret, "secret"
		}
	}
	client, err := redisclient.New(cc)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_URL does not parse: every decision will find Redis unavailable", slog.String("error", err.Error()))
		return failingClient("redis-unconfigured:0", errRedisUnconfigured)
	}
	rt.logger.LogAttrs(ctx, slog.LevelInfo, "redis client configured",
		slog.String("auth", auth),
		slog.Bool("tls", strings.HasPrefix(strings.ToLower(cc.URL), "rediss://")),
		slog.Bool("privateCA", cc.RootCAs != nil))
	return client
}

// dial opens the first connection to Redis in the background, by the
// cold-start deadline at the latest, so that the first decision finds one
// open (its dial, its TLS handshake and its authentication done, and a
// cluster's slot map loaded) instead of opening it itself, within its own
// budget. It is a PING, which Redis answers without touching a key; a
// failure is left for the first decision to meet, and report, as it would
// have without this: the decision dials again. It reports whether the
// PING was answered.
func (rt *Runtime) dial(ctx context.Context, deadline time.Time) bool {
	if !rt.ownsClient || rt.cfg.Redis.URL == "" {
		// A client given in Options is the caller's, already warm or
		// not; an unconfigured one has nothing to dial.
		return false
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	return rt.client.Ping(ctx).Err() == nil
}

// withIAMAuth returns cc set up to authenticate every new connection with
// an ElastiCache IAM authentication token signed with the default AWS
// configuration's credentials (the Lambda role's) for its region. It
// reports false, having logged why, when it cannot be set up.
func (rt *Runtime) withIAMAuth(ctx context.Context, cc redisclient.Config, aws *awsclients.Clients) (redisclient.Config, bool) {
	iam := rt.cfg.RedisIAM
	withIAM, region, err := aws.RedisIAM(ctx, cc, iam, rt.logger)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_IAM_USER: IAM authentication cannot be set up; Redis commands will fail with NOAUTH",
			slog.String("error", err.Error()))
		return cc, false
	}
	rt.logger.LogAttrs(ctx, slog.LevelInfo, "redis connections authenticate with IAM",
		slog.String("user", iam.User),
		slog.String("cache", iam.CacheName),
		slog.Bool("serverless", iam.Serverless),
		slog.String("region", region))
	return withIAM, true
}

// authSecret is the Redis AUTH token of REDIS_AUTH_SECRET_ARN after its
// read at cold start failed, as a redisclient.Config.CredentialsProvider:
// once read, every new connection authenticates with it (and the URL's user
// name, if any), and AWS is not called again. Until then, a connection that
// needs it starts a read when one is due (pacedSecret), so that a
// throttled Secrets Manager is not asked by every connection; the
// connection waits for the read at most until its own context ends (the
// decision's budget), and fails if the token is not there by then.
type authSecret struct {
	secret   *pacedSecret
	username string // the URL's, if any
}

// newAuthSecret returns the AUTH token of arn, to be read again, for
// connections to redisURL; the cold-start read has just failed. interval
// is the time between reads, secretRetryInterval when zero.
func newAuthSecret(arn, redisURL string, interval time.Duration, aws *awsclients.Clients, logger *slog.Logger) *authSecret {
	s := &authSecret{secret: &pacedSecret{
		arn:       arn,
		read:      aws.ReadSecret,
		interval:  retryInterval(interval),
		logger:    logger,
		failedLog: "read REDIS_AUTH_SECRET_ARN failed again; Redis connections keep failing until a later read succeeds",
		readLog:   "read REDIS_AUTH_SECRET_ARN: new Redis connections authenticate with its token",
		failedAt:  time.Now(),
	}}
	if u, err := url.Parse(redisURL); err == nil && u.User != nil {
		s.username = u.User.Username()
	}
	return s
}

// credentials returns the user name and AUTH token a new connection
// authenticates with, reading the secret if it is due (see authSecret).
func (s *authSecret) credentials(ctx context.Context) (username, password string, err error) {
	r, token, since := s.secret.start(ctx)
	if token != "" {
		return s.username, token, nil
	}
	if r == nil {
		return "", "", fmt.Errorf("no Redis AUTH token: REDIS_AUTH_SECRET_ARN has not been read (the last read failed %s ago; the next may start %s after it)",
			since.Round(time.Millisecond), s.secret.interval)
	}
	select {
	case <-r.done:
		if r.err != nil {
			return "", "", fmt.Errorf("no Redis AUTH token: %w", r.err)
		}
		return s.username, r.value, nil
	case <-ctx.Done():
		return "", "", fmt.Errorf("no Redis AUTH token: waiting for REDIS_AUTH_SECRET_ARN: %w", context.Cause(ctx))
	}
}

// errRedisUnconfigured is what every command of an unconfigured client
// fails with.
var errRedisUnconfigured = errors.New("REDIS_URL is not set or does not parse")

// failingClient is a client whose every command fails at dial with err:
// a function without a usable Redis (REDIS_URL unset, or the identity hash
// key not read) still answers every request by its failure policy. addr
// only names the client in errors and logs.
func failingClient(addr string, err error) redis.UniversalClient {
	return redis.NewClient(&redis.Options{
		Addr:       addr,
		MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, err
		},
		DialerRetries:         1,
		DisableIdentity:       true,
		Protocol:              2,
		ContextTimeoutEnabled: true,
	})
}
