// Command authorizer is slidegate's API Gateway Lambda authorizer (REST API
// REQUEST authorizer and HTTP API simple-response authorizer, one binary;
// see internal/authorizer). The runtime (configuration, Redis client,
// scripts, known keys) is built once here, at cold start, and reused by
// every warm invocation.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/app"
	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/tracing"
)

func main() {
	ctx := context.Background()
	// JSON lines at LOG_LEVEL (info by default: allowed decisions, at
	// debug, are not logged). The metrics go to standard output too, as
	// Embedded Metric Format records, whatever the level.
	logger := app.NewLogger(ctx, os.Stdout, os.Getenv)
	// go-redis's and the X-Ray SDK's own messages (a failed dial, a failed
	// send) become JSON lines too, within a per-message budget: a Redis
	// outage under a flood must not flood the log.
	libraryLogger := slog.New(app.SampledHandler(logger.Handler(), app.LogSampling{}))
	redis.SetLogger(app.RedisLog{L: libraryLogger})
	// X-Ray: silent without a daemon or a sampled trace header.
	if err := tracing.Configure(tracing.Options{Logger: libraryLogger}); err != nil {
		logger.LogAttrs(ctx, slog.LevelError, "configure tracing failed; Redis calls are not traced", slog.String("error", err.Error()))
	}
	rt, err := app.NewRuntime(ctx, os.Getenv, app.Options{Logger: logger, Metrics: os.Stdout})
	if err != nil {
		logger.LogAttrs(ctx, slog.LevelError, "cold start failed", slog.String("error", err.Error()))
		os.Exit(1)
	}
	defer rt.Close()
	lambda.Start(tracing.Handler(authorizer.New(rt)))
}
