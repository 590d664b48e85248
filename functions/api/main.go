// Command api is slidegate's API function: the example API of
// internal/apihandler, rate limited, served to API Gateway REST (v1) and
// HTTP API (v2) proxy events by one Lambda handler.
//
// The process-wide runtime (configuration, Redis client, scripts, known API
// keys) is built once at cold start and shared by every warm invocation.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/slidegate/slidegate/internal/apihandler"
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
	handler := apihandler.New(rt, apihandler.Options{Logger: rt.Logger()})
	lambda.Start(tracing.Handler(lambda.NewHandler(apihandler.NewLambdaHandler(handler, rt.Logger()).Invoke)))
}
