// Command minimal is the yardstick of the cold-start comparison in
// docs/benchmarks.md: the smallest aws-lambda-go authorizer, which decodes
// the same REQUEST event as slidegate's authorizer and allows every caller
// without looking anything up. It is built and run exactly as the
// authorizer is (linux, -tags lambda.norpc, stripped), so that the
// difference between their first answers is what slidegate adds.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func handle(_ context.Context, req events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	return events.APIGatewayCustomAuthorizerResponse{
		PrincipalID: "minimal",
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{
			Version: "2012-10-17",
			Statement: []events.IAMPolicyStatement{{
				Action:   []string{"execute-api:Invoke"},
				Effect:   "Allow",
				Resource: []string{req.MethodArn},
			}},
		},
	}, nil
}

func main() {
	lambda.Start(handle)
}
