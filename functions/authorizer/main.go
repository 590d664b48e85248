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
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	redis.SetLogger(app.RedisLog{L: logger})
	rt, err := app.NewRuntime(context.Background(), os.Getenv, app.Options{Logger: logger})
	if err != nil {
		logger.Error("cold start failed", slog.String("error", err.Error()))
		os.Exit(1)
	}
	defer rt.Close()
	lambda.Start(authorizer.New(rt))
}
