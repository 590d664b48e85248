package instance

import (
	"context"
	"io"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/tracing"
)

// NewFunctionRuntime is the cold start of a Lambda function's main: JSON
// logs at LOG_LEVEL on stdout (info by default, so allowed decisions, at
// debug, are not logged); go-redis's and the X-Ray SDK's own messages (a
// failed dial, a failed send) routed into the same log within a
// per-message budget, so that a Redis outage under a flood cannot flood
// it; tracing configured (silent without a daemon or a sampled trace
// header); and the Runtime, whose Embedded Metric Format records go to
// stdout whatever the level.
//
// go-redis and the X-Ray SDK keep their loggers in package variables: call
// it once per process, from main. The error is NewRuntime's, already
// logged.
func NewFunctionRuntime(ctx context.Context, stdout io.Writer, getenv func(string) string) (*Runtime, error) {
	logger := NewLogger(ctx, stdout, getenv)
	libraryLogger := slog.New(observe.SampledHandler(logger.Handler(), observe.LogSampling{}))
	redis.SetLogger(observe.RedisLog{L: libraryLogger})
	if err := tracing.Configure(tracing.Options{Logger: libraryLogger}); err != nil {
		logger.LogAttrs(ctx, slog.LevelError, "configure tracing failed; Redis calls are not traced", slog.String("error", err.Error()))
	}
	rt, err := NewRuntime(ctx, getenv, Options{Logger: logger, Metrics: stdout})
	if err != nil {
		logger.LogAttrs(ctx, slog.LevelError, "cold start failed", slog.String("error", err.Error()))
		return nil, err
	}
	return rt, nil
}
