package awsclients

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/apigateway"
)

// An endpoint a function must reach: Secrets Manager (the Redis AUTH token,
// the identity hash key, a JWT secret) and API Gateway's management API
// (apigateway, not execute-api: GetApiKeys, GetUsagePlans,
// GetUsagePlanKeys). A function in private subnets reaches neither without
// a NAT gateway or an interface VPC endpoint.
type endpoint struct {
	// name is the service as AWS names it; vpcService the last part of
	// its interface endpoint's service name (com.amazonaws.<region>.X).
	name, vpcService string
	once             sync.Once
}

// unreachableFix is what to do, the same for both endpoints.
const unreachableFix = "deploy the stack with VpcEndpoints=create (an interface endpoint with private DNS in the functions' subnets, " +
	"its security group open to the functions on 443; the VPC needs DNS resolution and DNS hostnames on), " +
	"or give the subnets a route out through a NAT gateway (docs/deploy.md, \"Reaching AWS from the VPC\")"

// SetLogger makes c log, once per process and endpoint, an error naming the
// endpoint a call could not reach and how to fix it (Unreachable), the
// first time a call to it fails for want of a connection: no answer in
// time, a refused connection, or a name that does not resolve. An answer
// of any kind, an error from the service included, is not logged here.
func (c *Clients) SetLogger(logger *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logger = logger
}

// Unreachable reports whether err is a call's failure to reach its
// endpoint (no connection, or none answered in time), rather than an
// answer.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// noteUnreachable logs err's endpoint as unreachable, once per process and
// endpoint, when err says so and a logger is set.
func (c *Clients) noteUnreachable(ctx context.Context, e *endpoint, err error) {
	if !Unreachable(err) {
		return
	}
	c.mu.Lock()
	logger := c.logger
	c.mu.Unlock()
	if logger == nil {
		return
	}
	e.once.Do(func() {
		addr := ""
		var u *url.Error
		if errors.As(err, &u) {
			if parsed, perr := url.Parse(u.URL); perr == nil {
				addr = parsed.Host
			}
		}
		region := c.region()
		logger.LogAttrs(ctx, slog.LevelError,
			"cannot reach "+e.name+" from this function: its interface VPC endpoint (com.amazonaws."+region+"."+e.vpcService+") or a NAT gateway is missing; "+unreachableFix,
			slog.String("endpoint", addr),
			slog.String("vpcEndpointService", "com.amazonaws."+region+"."+e.vpcService),
			slog.String("error", err.Error()))
	})
}

// region is the configuration's region, "<region>" before it is loaded.
func (c *Clients) region() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded && c.cfg.AWS.Region != "" {
		return c.cfg.AWS.Region
	}
	return "<region>"
}

// reachingGateway is an API Gateway client whose failures to connect are
// noted (noteUnreachable).
type reachingGateway struct {
	c     *Clients
	inner interface {
		apigateway.GetApiKeysAPIClient
		apigateway.GetUsagePlansAPIClient
		apigateway.GetUsagePlanKeysAPIClient
	}
}

func (g reachingGateway) GetApiKeys(ctx context.Context, in *apigateway.GetApiKeysInput, opts ...func(*apigateway.Options)) (*apigateway.GetApiKeysOutput, error) {
	out, err := g.inner.GetApiKeys(ctx, in, opts...)
	g.c.noteUnreachable(ctx, &g.c.gatewayEndpoint, err)
	return out, err
}

func (g reachingGateway) GetUsagePlans(ctx context.Context, in *apigateway.GetUsagePlansInput, opts ...func(*apigateway.Options)) (*apigateway.GetUsagePlansOutput, error) {
	out, err := g.inner.GetUsagePlans(ctx, in, opts...)
	g.c.noteUnreachable(ctx, &g.c.gatewayEndpoint, err)
	return out, err
}

func (g reachingGateway) GetUsagePlanKeys(ctx context.Context, in *apigateway.GetUsagePlanKeysInput, opts ...func(*apigateway.Options)) (*apigateway.GetUsagePlanKeysOutput, error) {
	out, err := g.inner.GetUsagePlanKeys(ctx, in, opts...)
	g.c.noteUnreachable(ctx, &g.c.gatewayEndpoint, err)
	return out, err
}
