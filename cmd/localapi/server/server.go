// Package server wires the local API Gateway of `make local`: the
// template's stage (cmd/localapi/gateway), the real authorizer
// (internal/authorizer) and API function (internal/apihandler) each with
// its own runtime as in two Lambda functions, and Redis: an embedded one
// (miniredis) unless REDIS_URL is set.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/slidegate/slidegate/cmd/localapi/gateway"
	"github.com/slidegate/slidegate/internal/apihandler"
	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/awsclients/sdkconfig"
	"github.com/slidegate/slidegate/internal/deployconfig"
	"github.com/slidegate/slidegate/internal/instance"
)

// Local defaults for what AWS would provide. They apply only when the
// variable is unset in the environment and in the template.
const (
	// DemoAPIKey is the API key `make local` knows (tier org) when
	// API_KEY_HASHES is unset: AWS would list the API Gateway keys instead.
	DemoAPIKey = deployconfig.DemoAPIKey
	// DemoProAPIKey is a second known key, on plan pro (API_KEY_HASHES
	// "hash:pro"): the stage's RateLimitPlans says what pro allows.
	DemoProAPIKey = deployconfig.DemoProAPIKey
	// DemoPlanClaim is JWT_PLAN_CLAIM with the demo JWT secret: a demo
	// token carrying "plan": "pro" is on plan pro.
	DemoPlanClaim = deployconfig.DemoPlanClaim
	// DemoJWTIssuer, DemoJWTAudience and DemoJWTSecret verify HS256 bearer
	// tokens (tier user) when no JWT variable is set.
	DemoJWTIssuer   = deployconfig.DemoJWTIssuer
	DemoJWTAudience = deployconfig.DemoJWTAudience
	DemoJWTSecret   = deployconfig.DemoJWTSecret
	// DemoHashKey is the identity hash key (RATE_LIMIT_HASH_KEY) when
	// neither it nor RATE_LIMIT_HASH_KEY_SECRET_ARN is set: AWS would read
	// the template's secret instead. For local runs only.
	DemoHashKey = deployconfig.DemoHashKey
	// AuthorizerFunctionID is the template's logical ID of the authorizer
	// function, whose own environment variables its runtime gets.
	AuthorizerFunctionID = "AuthorizerFunction"
)

// Config says what to serve and where.
type Config struct {
	// Addr is the listen address, e.g. "127.0.0.1:3000" (":0" for any
	// free port).
	Addr string
	// Stage is the stage to serve: its samconfig.toml environment's
	// parameter overrides build the stage variables.
	Stage string
	// HTTPAPI serves the HTTP API (v2) instead of the REST API.
	HTTPAPI bool
	// TemplatePath and SamconfigPath locate the SAM app's files.
	TemplatePath, SamconfigPath string
	// Getenv reads the environment (os.Getenv in main). Its values win
	// over the template's; REDIS_URL selects a real Redis.
	Getenv func(string) string
	// Logger receives the one line per request and the server's own
	// records; FunctionLogger receives the functions' records (their
	// decisions, errors). slog.Default() when nil.
	Logger, FunctionLogger *slog.Logger
	// FunctionMetrics receives the functions' CloudWatch Embedded Metric
	// Format records, one JSON line per decision; none when nil (they
	// would crowd a terminal).
	FunctionMetrics io.Writer
}

// Server is a running local API.
type Server struct {
	listener net.Listener
	http     *http.Server
	served   chan error
	closers  []func()
	// RedisURL is the Redis the functions use (the embedded one's URL
	// when REDIS_URL was unset).
	RedisURL string
	// Embedded is true when the Redis is the embedded miniredis.
	Embedded bool
	// RedisTimeout is the functions' REDIS_TIMEOUT, a decision's whole
	// Redis budget (EmbeddedRedisTimeout on the embedded Redis).
	RedisTimeout string
	// Spec is the template stage being served, with the limits given in
	// the environment already applied to its stage variables.
	Spec *gateway.Spec
	// Limits are the stage's limits and settings and where each came
	// from: the environment (which wins over the stage variable), the
	// stage's samconfig.toml, or the template's default.
	Limits []deployconfig.Setting
}

// Start loads the template, builds both functions' runtimes, and serves on
// cfg.Addr until Shutdown.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	fnLogger := cfg.FunctionLogger
	if fnLogger == nil {
		fnLogger = logger
	}
	srv := &Server{served: make(chan error, 1)}
	defer func() {
		if err != nil {
			srv.release()
		}
	}()

	spec, err := deployconfig.Load(cfg.TemplatePath, cfg.SamconfigPath, cfg.Stage)
	if err != nil {
		return nil, err
	}
	srv.Spec = spec

	getenv := cfg.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	srv.Limits = deployconfig.ApplyEnvironment(spec, getenv, filepath.Base(cfg.SamconfigPath))
	srv.RedisURL = getenv("REDIS_URL")
	if srv.RedisURL == "" {
		mr, err := miniredis.Run()
		if err != nil {
			return nil, fmt.Errorf("start embedded redis: %w", err)
		}
		srv.closers = append(srv.closers, mr.Close)
		srv.RedisURL, srv.Embedded = "redis://"+mr.Addr(), true
	}
	env := functionEnv(getenv, spec.Environment, srv.RedisURL, srv.Embedded)
	// The authorizer's own variables too: the template's HTTP API forwards
	// denials to the API function (HTTP_API_DENIALS), which `make local
	// HTTPAPI=1` must do as well for its 429s and 503s.
	authEnv := functionEnv(getenv, spec.EnvironmentOf(AuthorizerFunctionID), srv.RedisURL, srv.Embedded)
	srv.RedisTimeout = env("REDIS_TIMEOUT")

	metrics := cfg.FunctionMetrics
	if metrics == nil {
		metrics = io.Discard
	}
	authRuntime, err := instance.NewRuntime(ctx, authEnv, instance.Options{Logger: fnLogger.With("function", "AuthorizerFunction"), Metrics: metrics, AWSConfig: sdkconfig.Load})
	if err != nil {
		return nil, fmt.Errorf("authorizer runtime: %w", err)
	}
	srv.closers = append(srv.closers, func() { _ = authRuntime.Close() })
	apiRuntime, err := instance.NewRuntime(ctx, env, instance.Options{Logger: fnLogger.With("function", "ApiFunction"), Metrics: metrics, AWSConfig: sdkconfig.Load})
	if err != nil {
		return nil, fmt.Errorf("API runtime: %w", err)
	}
	srv.closers = append(srv.closers, func() { _ = apiRuntime.Close() })

	authorizerHandler := authorizer.New(authRuntime)
	apiLambda := apihandler.NewLambdaHandler(apihandler.New(apiRuntime, apihandler.Options{Logger: apiRuntime.Logger()}), apiRuntime.Logger())
	invokeAPI := func(ctx context.Context, event []byte) ([]byte, error) {
		out, err := apiLambda.Invoke(ctx, json.RawMessage(event))
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encode API function response: %w", err)
		}
		return b, nil
	}
	functions := map[string]gateway.Invoker{}
	for _, r := range spec.Routes {
		functions[r.Function] = invokeAPI
	}
	gw, err := gateway.New(gateway.Options{
		Spec:       spec,
		HTTPAPI:    cfg.HTTPAPI,
		Authorizer: authorizerHandler.Invoke,
		Functions:  functions,
		Logger:     logger,
	})
	if err != nil {
		return nil, err
	}

	var lc net.ListenConfig
	srv.listener, err = lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv.http = &http.Server{
		Handler:           gw,
		ReadHeaderTimeout: 10 * time.Second,
		// API Gateway's own integration timeout.
		WriteTimeout: 30 * time.Second,
		ErrorLog:     slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	go func() { srv.served <- srv.http.Serve(srv.listener) }()
	return srv, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Shutdown stops accepting requests, waits for those in flight (until ctx
// ends), then releases the runtimes and the embedded Redis.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if serveErr := <-s.served; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("serve: %w", serveErr))
	}
	s.release()
	return err
}

func (s *Server) release() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// EmbeddedRedisTimeout is the functions' Redis budget (REDIS_TIMEOUT) on
// make local's embedded Redis when the environment gives none: ten times
// the template's 100ms, which a loaded 2-core machine missed (the login
// tour answered 503 instead of 400). Only the local run uses it.
const EmbeddedRedisTimeout = "1s"

// functionEnv is the environment the functions see: the process
// environment, else the template's values, else the local defaults
// (deployconfig.LocalDefaults: the demo API keys, JWT secret and hash key,
// which AWS would provide otherwise).
//
// On the embedded Redis, REDIS_TIMEOUT is EmbeddedRedisTimeout unless the
// process environment sets it: the template's production budget is for
// ElastiCache in the functions' VPC, not for an in-process Redis sharing a
// loaded laptop's cores with the rest of the local run.
func functionEnv(getenv func(string) string, template map[string]string, redisURL string, embedded bool) func(string) string {
	defaults := deployconfig.LocalDefaults(getenv, template)
	return func(name string) string {
		if name == "REDIS_URL" {
			return redisURL
		}
		if name == "REDIS_TIMEOUT" && embedded && getenv(name) == "" {
			return EmbeddedRedisTimeout
		}
		if v := getenv(name); v != "" {
			return v
		}
		if v := template[name]; v != "" {
			return v
		}
		return defaults[name]
	}
}
