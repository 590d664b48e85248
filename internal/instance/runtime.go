// Package instance is one warm instance of a slidegate function: the
// process-wide state built once
// at cold start (NewRuntime: configuration, Redis client, secrets, identity
// sources, the identity hash key's gate) and the decision that uses it
// (Runtime.Resolve, and the Resolution's Decide, Quota and Acquire). An operator's tool reaches the same
// Redis through internal/operator, not through a Runtime.
package instance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/awsclients"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/internal/version"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

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
	// AWSConfig loads the AWS configuration the clients below are built
	// from when nil; the function's environment when AWSConfig is nil
	// (awsclients.FromEnvironment: what Lambda sets). make local gives the
	// SDK's full loader (sdkconfig.Load).
	AWSConfig awsclients.Loader
	// APIGateway lists the API keys and usage plans when API_KEY_HASHES is
	// unset (*apigateway.Client, or a test server behind the real SDK);
	// the aws-sdk-go-v2 API Gateway client of AWSConfig when nil.
	APIGateway identity.GatewayAPI
	// SecretsManager reads REDIS_AUTH_SECRET_ARN and JWT_HS256_SECRET_ARN;
	// the aws-sdk-go-v2 client of AWSConfig when nil.
	SecretsManager awsclients.SecretReader
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
	// coldStartScriptBudget bounds the script preload: decisions load
	// scripts on demand anyway.
	coldStartScriptBudget = time.Second
	// preloadDelay is how long after the cold start the script preload
	// starts when no decision has been answered by then.
	preloadDelay = 100 * time.Millisecond
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
	// networkControls is the process's copy of the live network
	// controls while the gate is not ready (its identity hash key not
	// read), read on the request path at most once per
	// controls.Propagation (liveNetworks); a ready gate's own
	// (hashedGate.controls) serves once it is installed.
	networkControls *controls.NetworkControlCache
	logger          *slog.Logger
	observer        *observe.Observer
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
	// firstDecision is closed by the first decision observed (observe),
	// which starts the script preload; closed by Close, which stops the
	// background work that has not started.
	firstDecision, closed   chan struct{}
	firstDecided, closeOnce sync.Once
	// dialled is closed when the connection NewRuntime opens in the
	// background has been dialled, or has failed to be, and the live
	// controls' first read made on it has ended.
	dialled chan struct{}
	// gateSet is closed when NewRuntime has set the first gate (hashed).
	gateSet chan struct{}
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
		coldStartDeadline: deadline, coldStartBudget: budget, firstDecision: make(chan struct{}), closed: make(chan struct{})}
	rt.stages = config.NewStageCache(cfg, func(err error) { logConfigErrors(context.Background(), logger, err) }).
		ReportRestarts(func(msg string) {
			// A stage's variables are read with its first request: a limit
			// they give another window or algorithm counts on keys of its
			// own, as slidegate check warns.
			logger.LogAttrs(context.Background(), slog.LevelWarn, "configuration starts callers afresh", slog.String("warning", msg))
		})
	// What loosens a limit without being wrong, as slidegate check says it.
	for _, w := range policy.Warnings(policy.Stage{Limits: rt.stages.For(nil)}) {
		logger.LogAttrs(ctx, slog.LevelWarn, "configuration loosens a limit", slog.String("warning", w))
	}

	aws := awsclients.New(opts.AWSConfig, opts.APIGateway, opts.SecretsManager)

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
	rt.dialled, rt.gateSet = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(rt.dialled)
		if !rt.dial(ctx, deadline) {
			return
		}
		// The live controls' first read, once the gate is set: the first
		// decision then finds them read (within controls.Propagation)
		// instead of reading them before its own script call. A read
		// that fails leaves nothing cached, and the decision reads again.
		select {
		case <-rt.gateSet:
		case <-rt.closed:
			return
		}
		readCtx, cancelRead := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancelRead()
		_, _ = rt.controlsCache(rt.hashed.Load()).Get(readCtx)
	}()
	// Live controls are always read: a block, an exemption or a scale
	// set by an operator applies from the next decision (identities) or
	// within controls.Propagation (networks), with no switch that
	// could leave an incident's block unread. Network controls are keyed
	// by the prefix alone, so this limiter (no identity hash key) reads
	// them while the hash key is pending; once a gate is ready, the
	// gate's Limiter reads them (hashedGate.controls).
	limiter, err := ratelimit.NewLimiter(rt.client, ratelimit.Options{KeyPrefix: cfg.KeyPrefix, Timeout: cfg.Redis.Timeout, Controls: true})
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	rt.networkControls = controls.NewNetworkControlCache(limiter.Controls(), controls.Propagation)
	if err := rt.setUpHashKey(ctx, aws, loads); err != nil {
		rt.Close()
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	close(rt.gateSet)
	rt.coldStartLoaded = loads.finished()
	// The scripts are preloaded in the background, once the first
	// decision has been answered (or preloadDelay after this, should none
	// come): composing, hashing and sending them would compete with the
	// first decision for the CPU of a small function, and that decision
	// does not need them (EVALSHA falls back to EVAL on NOSCRIPT, which
	// loads its script). It loads the decisions' scripts, not the
	// controlled ones (a Limiter without controls has none): only a
	// decision for an identity holding a live control runs those, and it
	// loads its script itself, once per node.
	preload, err := ratelimit.NewLimiter(rt.client, ratelimit.Options{KeyPrefix: cfg.KeyPrefix, Timeout: cfg.Redis.Timeout})
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("new runtime: %w", err)
	}
	rt.scriptsLoaded = make(chan struct{})
	go func() {
		defer close(rt.scriptsLoaded)
		select {
		case <-rt.firstDecision:
		case <-time.After(preloadDelay):
		case <-rt.closed:
			return
		}
		loadCtx, cancelLoad := context.WithTimeout(context.WithoutCancel(ctx), max(coldStartScriptBudget, cfg.Redis.Timeout))
		defer cancelLoad()
		if err := preload.LoadScripts(loadCtx); err != nil {
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
	rt.closeOnce.Do(func() { close(rt.closed) })
	if rt.ownsClient && rt.client != nil {
		if err := rt.client.Close(); err != nil {
			return fmt.Errorf("close redis client: %w", err)
		}
	}
	return nil
}
