// Command authorizer is slidegate's API Gateway Lambda authorizer (REST API
// REQUEST authorizer and HTTP API simple-response authorizer, one binary;
// see internal/authorizer). The runtime (configuration, Redis client,
// scripts, known keys) is built once here, at cold start, and reused by
// every warm invocation.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/tracing"
)

func main() {
	rt, err := instance.NewFunctionRuntime(context.Background(), os.Stdout, os.Getenv)
	if err != nil {
		// Lambda reports a failed init and retries it on the next request.
		os.Exit(1)
	}
	defer rt.Close()
	lambda.Start(tracing.Handler(authorizer.New(rt)))
}
