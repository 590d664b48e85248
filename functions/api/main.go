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
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	// go-redis's own messages (failed dials) become JSON lines too.
	redis.SetLogger(app.RedisLog{L: logger})
	ctx := context.Background()
	rt, err := app.NewRuntime(ctx, os.Getenv, app.Options{Logger: logger})
	if err != nil {
		// Lambda reports a failed init and retries it on the next request.
		logger.LogAttrs(ctx, slog.LevelError, "cold start failed", slog.String("error", err.Error()))
		os.Exit(1)
	}
	handler := apihandler.New(rt, apihandler.Options{Logger: rt.Logger()})
	lambda.Start(apihandler.NewLambdaHandler(handler, rt.Logger()).Invoke)
}
