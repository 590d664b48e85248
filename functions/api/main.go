// Command api is slidegate's API function: the example API of
// internal/apihandler, rate limited, served to API Gateway REST (v1) and
// HTTP API (v2) proxy events by one Lambda handler.
//
// The process-wide runtime (configuration, Redis client, scripts, known API
// keys) is built once at cold start and shared by every warm invocation.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/apihandler"
	"github.com/slidegate/slidegate/internal/app"
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
		// Lambda reports a failed init and retries it on the next request.
		logger.LogAttrs(ctx, slog.LevelError, "cold start failed", slog.String("error", err.Error()))
		os.Exit(1)
	}
	handler := apihandler.New(rt, apihandler.Options{Logger: rt.Logger()})
	lambda.Start(tracing.Handler(lambda.NewHandler(apihandler.NewLambdaHandler(handler, rt.Logger()).Invoke)))
}
