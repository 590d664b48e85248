// Command localapi is `make local`: slidegate's REST API (or, with
// -httpapi, its HTTP API) on a laptop, served the way API Gateway serves
// template.yaml: the real authorizer and API function run in-process for
// each request, with the real Lambda event shapes, the stage's variables
// and the template's gateway responses. Redis is embedded (miniredis)
// unless REDIS_URL is set. No Docker, no AWS account.
//
// Usage:
//
//	go run ./cmd/localapi [-addr 127.0.0.1:3000] [-stage dev] [-httpapi] [-v]
//
// Each flag defaults to its environment variable: ADDR, STAGE, HTTPAPI,
// VERBOSE. Ctrl-C stops it cleanly.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/slidegate/slidegate/cmd/localapi/server"
	"github.com/slidegate/slidegate/internal/instance"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "localapi:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:3000"), "listen address (env ADDR)")
	stage := flag.String("stage", envOr("STAGE", "dev"), "stage to serve; its samconfig.toml environment sets the stage variables (env STAGE)")
	httpAPI := flag.Bool("httpapi", envBool("HTTPAPI"), "serve the HTTP API (v2 events) instead of the REST API (env HTTPAPI)")
	verbose := flag.Bool("v", envBool("VERBOSE"), "also print the functions' own logs (every decision: LOG_LEVEL=debug) and their EMF metrics (env VERBOSE)")
	templatePath := flag.String("template", "template.yaml", "SAM template")
	samconfigPath := flag.String("config", "samconfig.toml", "SAM CLI configuration (parameter overrides per stage)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// The functions' own lines: warnings and errors only, unless LOG_LEVEL
	// asks for more (or less); -v shows every decision and the metrics.
	fnLevel := slog.LevelWarn
	if os.Getenv(instance.LogLevelVariable) != "" {
		level, err := instance.LogLevel(os.Getenv)
		if err != nil {
			logger.Error("bad configuration value", "error", err.Error())
		}
		fnLevel = level
	}
	var fnMetrics io.Writer
	if *verbose {
		fnLevel, fnMetrics = slog.LevelDebug, os.Stderr
	}
	fnLogger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: fnLevel}))
	if _, err := os.Stat(*samconfigPath); err != nil {
		*samconfigPath = ""
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(ctx, server.Config{
		Addr:            *addr,
		Stage:           *stage,
		HTTPAPI:         *httpAPI,
		TemplatePath:    *templatePath,
		SamconfigPath:   *samconfigPath,
		Getenv:          os.Getenv,
		Logger:          logger,
		FunctionLogger:  fnLogger,
		FunctionMetrics: fnMetrics,
	})
	if err != nil {
		return err
	}
	api := "REST API"
	vars := srv.Spec.StageVariables
	if *httpAPI {
		api, vars = "HTTP API", srv.Spec.HTTPStageVariables
	}
	redis := "embedded Redis (miniredis), budget " + srv.RedisTimeout + " a decision"
	if !srv.Embedded {
		redis = "Redis at REDIS_URL, budget " + srv.RedisTimeout + " a decision"
	}
	logger.Info("listening", "url", "http://"+srv.Addr(), "api", api, "stage", *stage, "redis", redis,
		"rateLimitAnonymous", vars["rateLimitAnonymous"], "rateLimitUser", vars["rateLimitUser"],
		"rateLimitOrg", vars["rateLimitOrg"], "rateLimitAlgorithm", vars["rateLimitAlgorithm"])
	// Each limit and where it comes from: an environment variable given
	// on the command line wins over the stage's samconfig.toml value.
	for _, l := range srv.Limits {
		logger.Info("limit", "name", l.Name, "value", l.Value, "from", l.Source)
	}
	for _, r := range srv.Spec.Routes {
		logger.Info("route", "method", r.Method, "path", r.Resource, "function", r.Function, "authorizer", r.Authorized && srv.Spec.HasAuthorizer)
	}
	logger.Info("try", "curl", "curl -i http://"+srv.Addr()+"/v1/items", "org tier", "-H 'x-api-key: "+server.DemoAPIKey+"'",
		"plan pro", "-H 'x-api-key: "+server.DemoProAPIKey+"'")

	<-ctx.Done()
	stop()
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}
