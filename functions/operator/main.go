// Command operator is slidegate's operator function: it sets, lifts and
// lists live controls (block, exempt, scale) on the functions' Redis for
// an operator who has AWS credentials but no route into the VPC. The
// slidegate command invokes it with --function; IAM (lambda:InvokeFunction)
// decides who may, and CloudTrail records every invocation. See
// internal/operator.Function.
//
// The configuration is read once at cold start; the Redis connection is
// made at the first invocation and reused while the instance is warm.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/operator"
)

func main() {
	ctx := context.Background()
	logger := instance.NewLogger(ctx, os.Stdout, os.Getenv)
	redis.SetLogger(observe.RedisLog{L: slog.New(observe.SampledHandler(logger.Handler(), observe.LogSampling{}))})
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		// Bad values are replaced by their defaults, as in the other
		// functions; say which.
		logger.LogAttrs(ctx, slog.LevelWarn, "bad configuration values, defaults used", slog.String("error", err.Error()))
	}
	fn := operator.NewFunction(cfg, operator.Options{Logger: logger}, logger)
	defer fn.Close()
	lambda.Start(fn)
}
