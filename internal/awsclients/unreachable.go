package awsclients

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/slidegate/slidegate/internal/identity"
)

// ErrServiceUnreachable marks a call to an AWS service that got no answer
// at all (a timeout, or a name that did not resolve): most often a function
// in a VPC with no route to the service. Its error says which interface
// endpoint is missing and how to add it.
var ErrServiceUnreachable = errors.New("AWS service unreachable")

// endpointOf names, for each service the clients call, the service and its
// interface VPC endpoint's service name after com.amazonaws.<region>.
var endpointOf = map[string]struct{ name, endpoint string }{
	serviceSecretsManager: {"Secrets Manager", "secretsmanager"},
	serviceAPIGateway:     {"API Gateway's control plane (the key listing)", "apigateway"},
}

// unreachable returns err, or, when err is a call that got no answer,
// err wrapped in ErrServiceUnreachable with the endpoint the function's
// network lacks and the two ways to fix it. A refused TLS certificate or
// an answer with an error status is not unreachable: it is left as it is.
func unreachable(service, region string, err error) error {
	if err == nil || !noAnswer(err) {
		return err
	}
	e := endpointOf[service]
	if region == "" {
		region = "<region>"
	}
	return fmt.Errorf("%w: no answer from %s: the function's subnets have no route to it; "+
		"deploy the template with VpcEndpoints=create (an interface endpoint com.amazonaws.%s.%s with private DNS), "+
		"or route the subnets through a NAT gateway: %w", ErrServiceUnreachable, e.name, region, e.endpoint, err)
}

// noAnswer reports whether err is a call that never got an answer: its
// deadline passed, its connection timed out, or the service's name did not
// resolve.
func noAnswer(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// gatewayCalls is an API Gateway client whose calls that get no answer say
// which endpoint is missing (unreachable).
type gatewayCalls struct {
	api    identity.GatewayAPI
	region string
}

// GetApiKeys implements identity.GatewayAPI.
func (g gatewayCalls) GetApiKeys(ctx context.Context, in *apigateway.GetApiKeysInput, opts ...func(*apigateway.Options)) (*apigateway.GetApiKeysOutput, error) {
	out, err := g.api.GetApiKeys(ctx, in, opts...)
	return out, unreachable(serviceAPIGateway, g.region, err)
}

// GetUsagePlans implements identity.GatewayAPI.
func (g gatewayCalls) GetUsagePlans(ctx context.Context, in *apigateway.GetUsagePlansInput, opts ...func(*apigateway.Options)) (*apigateway.GetUsagePlansOutput, error) {
	out, err := g.api.GetUsagePlans(ctx, in, opts...)
	return out, unreachable(serviceAPIGateway, g.region, err)
}

// GetUsagePlanKeys implements identity.GatewayAPI.
func (g gatewayCalls) GetUsagePlanKeys(ctx context.Context, in *apigateway.GetUsagePlanKeysInput, opts ...func(*apigateway.Options)) (*apigateway.GetUsagePlanKeysOutput, error) {
	out, err := g.api.GetUsagePlanKeys(ctx, in, opts...)
	return out, unreachable(serviceAPIGateway, g.region, err)
}
