package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// APIKeyLister lists API Gateway API keys: *apigateway.Client or anything
// answering GetApiKeys the same way (a test server behind the real SDK).
type APIKeyLister = identity.APIKeyLister

// SecretReader reads Secrets Manager secrets: *secretsmanager.Client.
type SecretReader interface {
	GetSecretValue(ctx context.Context, params *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Options are the dependencies of a Runtime. The zero value is production:
// every nil field is built from the environment.
type Options struct {
	// Logger receives JSON logs; JSON to stderr when nil.
	Logger *slog.Logger
	// Redis is the client decisions use; when nil it is built from
	// REDIS_URL, REDIS_CLUSTER, REDIS_TIMEOUT and REDIS_AUTH_SECRET_ARN, and
	// closed by Close. A client given here is not closed by Close.
	Redis redis.UniversalClient
	// HTTPClient fetches the JWKS; a client with a short timeout when nil.
	HTTPClient *http.Client
	// APIGateway lists the API keys when API_KEY_HASHES is unset; the
	// aws-sdk-go-v2 API Gateway client of the default AWS configuration
	// when nil.
	APIGateway APIKeyLister
	// SecretsManager reads REDIS_AUTH_SECRET_ARN and JWT_HS256_SECRET_ARN;
	// the aws-sdk-go-v2 client of the default AWS configuration when nil.
	SecretsManager SecretReader
	// Now is the clock of API key refreshes; time.Now when nil. Rate-limit
	// decisions use the Redis clock, never this one.
	Now func() time.Time
}

// Cold-start budgets: the Lambda init phase allows 10 s in all.
const (
	coldStartScriptBudget = time.Second
	coldStartAWSBudget    = 3 * time.Second
)

// Runtime is the process-wide state of a function: configuration, Redis
// client, loaded scripts, known API keys and JWT keys. Build one per
// process with NewRuntime and share it; it is safe for concurrent use.
type Runtime struct {
	cfg        *config.Config
	stages     *config.StageCache
	client     redis.UniversalClient
	ownsClient bool
	gate       *ratelimit.Gate
	resolver   *identity.Resolver
	logger     *slog.Logger
}

// NewRuntime builds the runtime at cold start: it parses the configuration
// once (bad values are logged and replaced by their defaults), builds the
// Redis client and preloads the scripts (a failure is logged, not fatal:
// Redis may be down at cold start and back by the first request), reads the
// secrets and lists the API keys. getenv is os.Getenv when nil.
//
// Nothing in the environment makes it fail: an unset REDIS_URL gives a
// runtime whose every decision finds Redis unavailable (fail-open routes
// degrade, fail-closed routes fail), an unreadable secret or key list is
// logged and retried or worked around; the error is for a Redis client
// given in opts that pkg/ratelimit refuses.
func NewRuntime(ctx context.Context, getenv func(string) string, opts Options) (*Runtime, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	cfg, cfgErr := config.FromEnv(getenv)
	logConfigErrors(ctx, logger, cfgErr)

	rt := &Runtime{cfg: cfg, logger: logger}
	rt.stages = config.NewStageCache(cfg, func(err error) { logConfigErrors(context.Background(), logger, err) })

	aws := &awsClients{apiGateway: opts.APIGateway, secrets: opts.SecretsManager}

	// Redis.
	rt.client = opts.Redis
	if rt.client == nil {
		client, err := rt.buildClient(ctx, aws)
		if err != nil {
			return nil, err
		}
		rt.client, rt.ownsClient = client, true
	}
	limiter, err := ratelimit.NewLimiter(rt.client, ratelimit.Options{KeyPrefix: cfg.KeyPrefix, Timeout: cfg.Redis.Timeout})
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	rt.gate = ratelimit.NewGate(limiter, ratelimit.GateOptions{FallbackInstances: cfg.FallbackInstances})
	loadCtx, cancel := context.WithTimeout(ctx, max(coldStartScriptBudget, cfg.Redis.Timeout))
	if err := limiter.LoadScripts(loadCtx); err != nil {
		logger.LogAttrs(ctx, slog.LevelWarn, "preload rate-limit scripts failed; decisions will load them on demand",
			slog.String("error", err.Error()))
	}
	cancel()

	// Who is counted.
	keys, err := rt.buildKeyStore(ctx, aws, opts.Now)
	if err != nil {
		rt.Close()
		return nil, err
	}
	verifier, err := rt.buildVerifier(ctx, aws, opts.HTTPClient)
	if err != nil {
		rt.Close()
		return nil, err
	}
	rt.resolver = identity.NewResolver(keys, verifier, logger)

	logger.LogAttrs(ctx, slog.LevelInfo, "runtime ready",
		slog.String("algorithm", string(cfg.Tiers.Algorithm)),
		slog.String("anonymous", cfg.Tiers.Anonymous.String()),
		slog.String("user", cfg.Tiers.User.String()),
		slog.String("org", cfg.Tiers.Org.String()),
		slog.Int("routeLimits", len(cfg.Routes)),
		slog.Bool("redisCluster", cfg.Redis.Cluster),
		slog.Duration("redisTimeout", cfg.Redis.Timeout),
		slog.Bool("jwt", verifier != nil),
		slog.Bool("apiKeyHashes", cfg.APIKeyHashes != nil))
	return rt, nil
}

// buildClient builds the Redis client from the configuration.
func (rt *Runtime) buildClient(ctx context.Context, aws *awsClients) (redis.UniversalClient, error) {
	cc := rt.cfg.Redis
	if cc.URL == "" {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_URL is not set: every decision will find Redis unavailable (fail-open routes use the local fallback limit, fail-closed routes fail)")
		return unconfiguredClient(), nil
	}
	if arn := rt.cfg.RedisAuthSecretARN; arn != "" {
		secret, err := aws.readSecret(ctx, arn)
		if err != nil {
			// Without the token every command fails with NOAUTH; that is
			// an outage the failure policy handles, and the log says why.
			rt.logger.LogAttrs(ctx, slog.LevelError, "read REDIS_AUTH_SECRET_ARN failed", slog.String("error", err.Error()))
		} else {
			cc.Password = secret
		}
	}
	client, err := ratelimit.NewClient(cc)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "REDIS_URL does not parse: every decision will find Redis unavailable", slog.String("error", err.Error()))
		return unconfiguredClient(), nil
	}
	return client, nil
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

// buildKeyStore returns the known API keys: API_KEY_HASHES, or the API
// Gateway keys listed now (a failed listing is logged and retried later).
func (rt *Runtime) buildKeyStore(ctx context.Context, aws *awsClients, now func() time.Time) (identity.KeyStore, error) {
	if rt.cfg.APIKeyHashes != nil {
		return identity.StaticKeys(rt.cfg.APIKeyHashes), nil
	}
	lister, err := aws.apiGatewayClient(ctx)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "no API Gateway client: requests with API keys count as anonymous",
			slog.String("error", err.Error()))
		return unverifiableKeys{}, nil
	}
	keys := identity.NewGatewayKeys(lister, rt.cfg.APIKeysRefresh, now, rt.logger)
	listCtx, cancel := context.WithTimeout(ctx, coldStartAWSBudget)
	defer cancel()
	if err := keys.Refresh(listCtx); err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "list API Gateway keys at cold start failed; requests with keys count as anonymous until a listing succeeds",
			slog.String("error", err.Error()))
	}
	return keys, nil
}

// unverifiableKeys is the key store of a runtime that cannot list keys at
// all: every key is neither trusted nor refused.
type unverifiableKeys struct{}

// Lookup implements identity.KeyStore.
func (unverifiableKeys) Lookup(context.Context, string) identity.KeyStatus {
	return identity.KeyUnverifiable
}

// buildVerifier returns the bearer token verifier, or nil when no JWT key
// source is configured.
func (rt *Runtime) buildVerifier(ctx context.Context, aws *awsClients, httpClient *http.Client) (*identity.Verifier, error) {
	j := rt.cfg.JWT
	if !j.Enabled() {
		return nil, nil
	}
	secret := j.HS256Secret
	if j.HS256SecretARN != "" {
		s, err := aws.readSecret(ctx, j.HS256SecretARN)
		if err != nil {
			rt.logger.LogAttrs(ctx, slog.LevelError, "read JWT_HS256_SECRET_ARN failed; HS256 tokens will not verify", slog.String("error", err.Error()))
			secret = nil
		} else {
			secret = []byte(s)
		}
	}
	v := identity.NewVerifier(identity.VerifierConfig{
		Issuer:      j.Issuer,
		Audience:    j.Audience,
		HS256Secret: secret,
		JWKSURL:     j.JWKSURL,
		HTTPClient:  httpClient,
		Logger:      rt.logger,
	})
	if v == nil {
		// The only key source was a secret that could not be read: bearer
		// tokens must still be refused, not ignored, so verify against a
		// random key nobody holds.
		unguessable := make([]byte, 32)
		_, _ = rand.Read(unguessable) // never fails (crypto/rand)
		v = identity.NewVerifier(identity.VerifierConfig{Issuer: j.Issuer, Audience: j.Audience, HS256Secret: unguessable, Logger: rt.logger})
	}
	if j.JWKSURL != "" {
		fetchCtx, cancel := context.WithTimeout(ctx, coldStartAWSBudget)
		defer cancel()
		if err := v.Prefetch(fetchCtx); err != nil {
			rt.logger.LogAttrs(ctx, slog.LevelError, "fetch JWKS at cold start failed; retried on the first token", slog.String("error", err.Error()))
		}
	}
	return v, nil
}

// logConfigErrors logs each configuration error on its own line.
func logConfigErrors(ctx context.Context, logger *slog.Logger, err error) {
	if err == nil {
		return
	}
	var errs []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		logger.LogAttrs(ctx, slog.LevelError, "bad configuration value", slog.String("error", e.Error()))
	}
}

// Logger returns the runtime's logger.
func (rt *Runtime) Logger() *slog.Logger { return rt.logger }

// Config returns the parsed configuration (shared: do not modify).
func (rt *Runtime) Config() *config.Config { return rt.cfg }

// FailClosed reports whether a path's route fails closed.
func (rt *Runtime) FailClosed(path string) bool {
	return config.IsFailClosed(rt.cfg.FailClosed, path)
}

// Close releases the Redis client if the runtime built it.
func (rt *Runtime) Close() error {
	if rt.ownsClient && rt.client != nil {
		if err := rt.client.Close(); err != nil {
			return fmt.Errorf("close redis client: %w", err)
		}
	}
	return nil
}

// lowerHeaders returns h with lower-case names, copying only when needed.
func lowerHeaders(h map[string]string) map[string]string {
	for k := range h {
		if strings.ToLower(k) != k {
			out := make(map[string]string, len(h))
			for k, v := range h {
				lk := strings.ToLower(k)
				if _, dup := out[lk]; dup && k == lk {
					// Prefer the exactly lower-case spelling; either is the
					// caller's own choice.
					out[lk] = v
					continue
				} else if dup {
					continue
				}
				out[lk] = v
			}
			return out
		}
	}
	return h
}
