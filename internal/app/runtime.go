package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/internal/version"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// SecretReader reads Secrets Manager secrets: *secretsmanager.Client.
type SecretReader interface {
	GetSecretValue(ctx context.Context, params *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Options are the dependencies of a Runtime. The zero value is production:
// every nil field is built from the environment.
type Options struct {
	// Logger receives JSON logs; when nil, JSON to stderr at the level of
	// LOG_LEVEL (NewLogger).
	Logger *slog.Logger
	// Metrics receives the CloudWatch Embedded Metric Format records, one
	// JSON line per decision (see MetricDecisions); os.Stdout when nil,
	// which Lambda sends to CloudWatch Logs, where the metrics are
	// extracted. It is written directly, not through Logger, so that
	// neither the log level nor log sampling ever drops a metric.
	// io.Discard turns metrics off.
	Metrics io.Writer
	// DecisionLogSampling bounds the decision log lines per outcome
	// (observe.LogSampling); the zero value is the default budget. Its clock is
	// Now when its own Now is nil.
	DecisionLogSampling observe.LogSampling
	// Redis is the client decisions use; when nil it is built from
	// REDIS_URL, REDIS_CLUSTER, REDIS_TIMEOUT and REDIS_AUTH_SECRET_ARN, and
	// closed by Close. A client given here is not closed by Close.
	Redis redis.UniversalClient
	// HTTPClient fetches the JWKS; a client with a short timeout when nil.
	HTTPClient *http.Client
	// APIGateway lists the API keys and usage plans when API_KEY_HASHES is
	// unset (*apigateway.Client, or a test server behind the real SDK);
	// the aws-sdk-go-v2 API Gateway client of the default AWS
	// configuration when nil.
	APIGateway identity.GatewayAPI
	// SecretsManager reads REDIS_AUTH_SECRET_ARN and JWT_HS256_SECRET_ARN;
	// the aws-sdk-go-v2 client of the default AWS configuration when nil.
	SecretsManager SecretReader
	// Now is the clock of API key refreshes and of the decision log
	// budget; time.Now when nil. Rate-limit decisions use the Redis clock,
	// never this one.
	Now func() time.Time
	// ColdStartBudget is how long NewRuntime may take in all;
	// DefaultColdStartBudget when zero.
	ColdStartBudget time.Duration
	// SecretRetryInterval is how long after a failed read of the Redis
	// AUTH secret (REDIS_AUTH_SECRET_ARN) the next may start, when a new
	// connection needs it; 30 s when zero. Tests shorten it.
	SecretRetryInterval time.Duration
}

// Cold-start timing. The Lambda init phase allows 10 s in all.
const (
	// DefaultColdStartBudget bounds what is loaded at cold start: the
	// Redis AUTH secret and the identity hash key, which NewRuntime waits
	// for, and the API Gateway keys, the JWKS and the HS256 secret, which
	// the first request carrying an API key or a bearer token waits for,
	// all from the start of NewRuntime. What has not loaded by then goes
	// on loading in the background.
	DefaultColdStartBudget = 4 * time.Second
	// coldStartScriptBudget bounds the script preload (within the
	// cold-start budget): decisions load scripts on demand anyway.
	coldStartScriptBudget = time.Second
)

// Runtime is the process-wide state of a function: configuration, Redis
// client, loaded scripts, known API keys and JWT keys. Build one per
// process with NewRuntime and share it; it is safe for concurrent use.
type Runtime struct {
	cfg        *config.Config
	stages     *config.StageCache
	client     redis.UniversalClient
	ownsClient bool
	// hashed is the gate decisions use and the identity hasher of its
	// keys; it changes once, when an identity hash key read after cold
	// start arrives.
	hashed atomic.Pointer[hashedGate]
	// hashKey re-reads RATE_LIMIT_HASH_KEY_SECRET_ARN while its key is
	// missing; nil when no secret is configured.
	hashKey  *pacedSecret
	resolver *identity.Resolver
	logger   *slog.Logger
	observer *observe.Observer
	// unknownPlans logs each unconfigured plan a caller carries, once.
	unknownPlans unknownPlans

	// gatewayKeys and verifier, when configured, are the identity sources
	// that load in the background (also held by resolver).
	gatewayKeys *identity.GatewayKeys
	verifier    *identity.Verifier
	// coldStartLoaded is closed when the cold-start loads NewRuntime waits
	// for (the identity hash key secret) have ended, within the cold-start
	// budget or after it.
	coldStartLoaded chan struct{}
	// identityLoads are the cold-start loads only requests with
	// credentials need (the API Gateway key listing, the JWKS, the HS256
	// secret); identityLoaded is closed when they have ended. NewRuntime
	// does not wait for them: a decision on a request carrying an API key
	// or a bearer token does, until coldStartDeadline at most
	// (awaitIdentity).
	identityLoads     *coldStartLoads
	identityLoaded    chan struct{}
	coldStartDeadline time.Time
	coldStartBudget   time.Duration
	budgetSpentLogged sync.Once
	// scriptsLoaded is closed when the script preload, which runs in the
	// background, has ended.
	scriptsLoaded chan struct{}
	// secretRetryInterval paces re-reads of a secret that could not be read
	// at cold start (Options.SecretRetryInterval).
	secretRetryInterval time.Duration
}

// NewRuntime builds the runtime at cold start: it parses the configuration
// once (bad values are logged and replaced by their defaults), builds the
// Redis client, reads the secrets every decision needs (the Redis AUTH
// secret, the identity hash key secret), and starts in the background what
// only some requests need: the script preload (a decision loads a missing
// script itself; a failure is logged, not fatal), the API key listing, the
// JWKS and the HS256 secret. getenv is os.Getenv when nil.
//
// It takes at most opts.ColdStartBudget (DefaultColdStartBudget), plus a
// few milliseconds, however slow AWS, the JWKS host or Redis are: every
// step shares that one deadline and the independent ones run in parallel.
// The Redis AUTH secret is bounded by it (a secret not read by then is
// read again when a new connection needs it, at most every
// Options.SecretRetryInterval; until then Redis answers NOAUTH, which the
// failure policy handles), and so is the wait for the identity hash key.
// NewRuntime does not wait for the API keys, the JWKS and the HS256
// secret: a request carrying an API key or a bearer token waits for them,
// until the same deadline at most (counted from the start of NewRuntime),
// and they go on loading in the background after it; until they arrive
// API keys count as anonymous and bearer tokens do not verify.
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
		logger = NewLogger(ctx, os.Stderr, getenv)
	}
	metrics := opts.Metrics
	if metrics == nil {
		metrics = os.Stdout
	}
	sampling := opts.DecisionLogSampling
	if sampling.Now == nil {
		sampling.Now = opts.Now
	}
	budget := opts.ColdStartBudget
	if budget <= 0 {
		budget = DefaultColdStartBudget
	}
	initCtx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	deadline, _ := initCtx.Deadline()

	cfg, cfgErr := config.FromEnv(getenv)
	logConfigErrors(ctx, logger, cfgErr)

	rt := &Runtime{cfg: cfg, logger: logger, observer: observe.New(logger, metrics, sampling), secretRetryInterval: opts.SecretRetryInterval,
		coldStartDeadline: deadline, coldStartBudget: budget}
	rt.stages = config.NewStageCache(cfg, func(err error) { logConfigErrors(context.Background(), logger, err) })

	aws := &awsClients{apiGateway: opts.APIGateway, secrets: opts.SecretsManager}

	// Who is counted: these loads start first and run alongside Redis's.
	// Only a request with an API key or a bearer token needs them, and it
	// waits for them (awaitIdentity); NewRuntime does not.
	rt.identityLoads = &coldStartLoads{ctx: context.WithoutCancel(ctx)}
	keys := rt.buildKeyStore(ctx, aws, opts.Now, rt.identityLoads)
	rt.verifier = rt.buildVerifier(aws, opts.HTTPClient, rt.identityLoads)
	rt.resolver = identity.NewResolver(keys, rt.verifier, logger)
	rt.identityLoaded = rt.identityLoads.finished()
	// What every decision needs: the identity hash key secret.
	loads := &coldStartLoads{ctx: context.WithoutCancel(ctx)}

	// Redis.
	rt.client = opts.Redis
	if rt.client == nil {
		rt.client, rt.ownsClient = rt.buildClient(initCtx, aws), true
		// One subsegment per Redis call in traced invocations (X-Ray
		// today: see internal/tracing); a no-op without a trace.
		tracing.Instrument(rt.client)
	}
	limiter, err := ratelimit.NewLimiter(rt.client, ratelimit.Options{KeyPrefix: cfg.KeyPrefix, Timeout: cfg.Redis.Timeout})
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	if err := rt.setUpHashKey(ctx, aws, loads); err != nil {
		rt.Close()
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	rt.coldStartLoaded = loads.finished()
	// The first decision does not need the scripts preloaded (EVALSHA falls
	// back to EVAL on NOSCRIPT, which loads the script), so the preload
	// runs in the background, within the cold-start budget.
	rt.scriptsLoaded = make(chan struct{})
	go func() {
		defer close(rt.scriptsLoaded)
		loadDeadline := time.Now().Add(max(coldStartScriptBudget, cfg.Redis.Timeout))
		if deadline.Before(loadDeadline) {
			loadDeadline = deadline
		}
		loadCtx, cancelLoad := context.WithDeadline(context.WithoutCancel(ctx), loadDeadline)
		defer cancelLoad()
		if err := limiter.LoadScripts(loadCtx); err != nil {
			logger.LogAttrs(ctx, slog.LevelWarn, "preload rate-limit scripts failed; decisions will load them on demand",
				slog.String("error", err.Error()))
		}
	}()

	select {
	case <-rt.coldStartLoaded:
	case <-initCtx.Done():
		rt.logBudgetSpent(ctx, loads)
	}

	logger.LogAttrs(ctx, slog.LevelInfo, "runtime ready",
		slog.String("algorithm", string(cfg.Tiers.Algorithm)),
		slog.String("anonymous", cfg.Tiers.Anonymous.String()),
		slog.String("user", cfg.Tiers.User.String()),
		slog.String("org", cfg.Tiers.Org.String()),
		slog.Int("routeLimits", len(cfg.Routes)),
		slog.Bool("redisCluster", cfg.Redis.Cluster),
		slog.Duration("redisTimeout", cfg.Redis.Timeout),
		slog.Bool("jwt", rt.verifier != nil),
		slog.Bool("apiKeyHashes", cfg.APIKeyHashes != nil),
		slog.Int("ipv6Prefix", cfg.IPv6Prefix),
		slog.String("identityHash", rt.identityHashMode()),
		slog.String("tracer", tracing.Tracer),
		slog.String("version", version.Version()))
	return rt, nil
}

// setUpHashKey installs the gate decisions use, with the identity hash
// key: RATE_LIMIT_HASH_KEY at once; RATE_LIMIT_HASH_KEY_SECRET_ARN read as
// a cold-start load (until it is read, and if the read fails until a
// later one succeeds, decisions behave as if Redis were unavailable);
// neither: unkeyed, with a warning.
func (rt *Runtime) setUpHashKey(ctx context.Context, aws *awsClients, loads *coldStartLoads) error {
	hk := rt.cfg.HashKey
	if !hk.Configured() {
		gate, err := rt.newGate(rt.client, nil)
		if err != nil {
			return err
		}
		rt.hashed.Store(&hashedGate{gate: gate, ready: true})
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
	s := rt.hashKeySecret(hk.SecretARN, aws.readSecret)
	rt.hashKey = s
	loads.start("RATE_LIMIT_HASH_KEY_SECRET_ARN", func(ctx context.Context) {
		if r, _, _ := s.start(ctx); r != nil {
			<-r.done
		}
	})
	return nil
}

// logBudgetSpent logs, once per runtime, that the cold-start budget ran
// out with loads still pending.
func (rt *Runtime) logBudgetSpent(ctx context.Context, loads *coldStartLoads) {
	rt.budgetSpentLogged.Do(func() {
		rt.logger.LogAttrs(ctx, slog.LevelWarn, "cold-start budget spent; the rest loads in the background (API keys count as anonymous and bearer tokens do not verify until their keys arrive)",
			slog.Duration("budget", rt.coldStartBudget), slog.Any("loading", loads.pending()))
	})
}

// awaitIdentity waits, for a request that carries an API key or a bearer
// token (headers with lower-case names, edge.FoldHeaders), until the cold-start loads of the
// identity sources (API key listing, JWKS, HS256 secret) have ended, the
// cold-start budget is spent, or ctx ends. Requests without credentials,
// and every request once the loads have ended, never wait.
func (rt *Runtime) awaitIdentity(ctx context.Context, headers map[string]string) {
	select {
	case <-rt.identityLoaded:
		return
	default:
	}
	if headers["x-api-key"] == "" && headers["authorization"] == "" {
		return
	}
	wait := time.Until(rt.coldStartDeadline)
	if wait <= 0 {
		rt.logBudgetSpent(ctx, rt.identityLoads)
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-rt.identityLoaded:
	case <-timer.C:
		rt.logBudgetSpent(ctx, rt.identityLoads)
	case <-ctx.Done():
	}
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

// coldStartLoads are the loads NewRuntime starts in the background: it
// waits for them until its deadline, and they go on after it, each bounded
// by its own timeout.
type coldStartLoads struct {
	// ctx is NewRuntime's context without its cancellation: a load that
	// outlives NewRuntime is not cut short by the caller's context ending.
	ctx context.Context
	wg  sync.WaitGroup

	mu      sync.Mutex
	loading map[string]struct{}
}

// start runs load in the background under name (for the log).
func (l *coldStartLoads) start(name string, load func(context.Context)) {
	l.mu.Lock()
	if l.loading == nil {
		l.loading = make(map[string]struct{})
	}
	l.loading[name] = struct{}{}
	l.mu.Unlock()
	l.wg.Go(func() {
		load(l.ctx)
		l.mu.Lock()
		delete(l.loading, name)
		l.mu.Unlock()
	})
}

// finished returns a channel closed when every load started so far has
// ended.
func (l *coldStartLoads) finished() chan struct{} {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	return done
}

// pending names the loads still running, sorted.
func (l *coldStartLoads) pending() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.loading))
}

// WaitLoaded waits until nothing the runtime loads in the background is in
// flight (the cold-start loads that outlived the cold-start budget, API key
// listings, JWKS fetches), or until ctx is done. Decisions never wait for
// these loads; this is for tests and tools that need a settled runtime.
// The error is ctx's, or that of the last listing or fetch waited for.
func (rt *Runtime) WaitLoaded(ctx context.Context) error {
	for _, loaded := range []chan struct{}{rt.coldStartLoaded, rt.identityLoaded, rt.scriptsLoaded} {
		select {
		case <-loaded:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var errs []error
	if rt.gatewayKeys != nil {
		errs = append(errs, rt.gatewayKeys.Wait(ctx))
	}
	if rt.verifier != nil {
		errs = append(errs, rt.verifier.Wait(ctx))
	}
	return errors.Join(errs...)
}

// buildKeyStore returns the known API keys: API_KEY_HASHES, or the API
// Gateway keys, whose first listing it starts in the background (a failed
// listing is logged and retried later).
func (rt *Runtime) buildKeyStore(ctx context.Context, aws *awsClients, now func() time.Time, loads *coldStartLoads) identity.KeyStore {
	if rt.cfg.APIKeyHashes != nil {
		return identity.StaticKeyPlans{StaticKeys: rt.cfg.APIKeyHashes, Plans: rt.cfg.APIKeyPlans}
	}
	api, err := aws.apiGatewayClient(ctx)
	if err != nil {
		rt.logger.LogAttrs(ctx, slog.LevelError, "no API Gateway client: requests with API keys count as anonymous",
			slog.String("error", err.Error()))
		return unverifiableKeys{}
	}
	keys := identity.NewGatewayKeys(api, rt.cfg.APIKeysRefresh, now, rt.logger)
	rt.gatewayKeys = keys
	loads.start("API Gateway keys", func(ctx context.Context) {
		if err := keys.Refresh(ctx); err != nil {
			rt.logger.LogAttrs(ctx, slog.LevelError, "list API Gateway keys at cold start failed; requests with keys count as anonymous until a listing succeeds",
				slog.String("error", err.Error()))
		}
	})
	return keys
}

// unverifiableKeys is the key store of a runtime that cannot list keys at
// all: every key is neither trusted nor refused.
type unverifiableKeys struct{}

// Lookup implements identity.KeyStore.
func (unverifiableKeys) Lookup(context.Context, string, string, string) identity.KeyStatus {
	return identity.KeyUnverifiable
}

// buildVerifier returns the bearer token verifier, or nil when no JWT key
// source is configured. It starts reading JWT_HS256_SECRET_ARN and fetching
// the JWKS in the background; until the secret is read HS256 tokens do not
// verify, and if it cannot be read, or is shorter than
// identity.MinHS256SecretLen, they never do (they are refused, not
// ignored).
func (rt *Runtime) buildVerifier(aws *awsClients, httpClient *http.Client, loads *coldStartLoads) *identity.Verifier {
	j := rt.cfg.JWT
	if !j.Enabled() {
		return nil
	}
	vc := identity.VerifierConfig{
		Issuer:     j.Issuer,
		Audience:   j.Audience,
		JWKSURL:    j.JWKSURL,
		HTTPClient: httpClient,
		Leeway:     j.Leeway,
		PlanClaim:  rt.cfg.JWTPlanClaim,
		Logger:     rt.logger,
	}
	if j.HS256SecretARN != "" {
		vc.HS256SecretPending = true
	} else {
		vc.HS256Secret = j.HS256Secret
	}
	v := identity.NewVerifier(vc)
	if arn := j.HS256SecretARN; arn != "" {
		loads.start("JWT_HS256_SECRET_ARN", func(ctx context.Context) {
			secret, err := aws.readSecret(ctx, arn)
			if err != nil {
				rt.logger.LogAttrs(ctx, slog.LevelError, "read JWT_HS256_SECRET_ARN failed; HS256 tokens will not verify", slog.String("error", err.Error()))
				return
			}
			if err := v.SetHS256Secret([]byte(secret)); err != nil {
				rt.logger.LogAttrs(ctx, slog.LevelError, "JWT_HS256_SECRET_ARN: secret refused; HS256 tokens will not verify", slog.String("error", err.Error()))
			}
		})
	}
	// A refused JWT_JWKS_URL (reported with the configuration) is never
	// fetched; the tokens it would verify are refused.
	if j.JWKSURL != "" && identity.CheckJWKSURL(j.JWKSURL) == nil {
		loads.start("JWKS", func(ctx context.Context) {
			if err := v.Prefetch(ctx); err != nil {
				rt.logger.LogAttrs(ctx, slog.LevelError, "fetch JWKS at cold start failed; fetched again in the background on a token with an unknown kid", slog.String("error", err.Error()))
			}
		})
	}
	return v
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

// HTTPAPIDenials is what the HTTP API authorizer does with a request it
// cannot admit (HTTP_API_DENIALS).
func (rt *Runtime) HTTPAPIDenials() config.Denials { return rt.cfg.HTTPAPIDenials }

// Close releases the Redis client if the runtime built it.
func (rt *Runtime) Close() error {
	if rt.ownsClient && rt.client != nil {
		if err := rt.client.Close(); err != nil {
			return fmt.Errorf("close redis client: %w", err)
		}
	}
	return nil
}
