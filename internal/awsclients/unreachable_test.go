package awsclients_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigateway"
	"github.com/slidegate/slidegate/internal/awsclients"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
)

// blackHole is an address that accepts connections and never answers, as
// a service behind a missing route looks to a caller that only sees its
// own deadline pass.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { <-done; c.Close() }()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestUnreachableServicesSayWhichEndpointIsMissing: a Secrets Manager read
// or an API Gateway key listing that gets no answer fails with
// ErrServiceUnreachable and names the interface endpoint the subnets lack
// and the template parameter that creates it; before, the secret's error
// said only that the deadline passed, and the listing's said nothing of
// the network.
func TestUnreachableServicesSayWhichEndpointIsMissing(t *testing.T) {
	env := lambdaEnv()
	env["AWS_ENDPOINT_URL"] = blackHole(t)
	env["AWS_MAX_ATTEMPTS"] = "1"
	load := func(context.Context) (awsclients.Config, error) { return awsclients.FromEnvironment(envOf(env)) }
	c := awsclients.New(load, nil, nil)

	_, err := c.ReadSecret(context.Background(), "arn:aws:secretsmanager:eu-west-1:1:secret:k")
	checkUnreachable(t, "ReadSecret", err, "com.amazonaws.eu-west-1.secretsmanager")

	api, err := c.APIGateway(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = api.GetApiKeys(ctx, &apigateway.GetApiKeysInput{})
	checkUnreachable(t, "GetApiKeys", err, "com.amazonaws.eu-west-1.apigateway")
}

func checkUnreachable(t *testing.T, call string, err error, endpoint string) {
	t.Helper()
	if !errors.Is(err, awsclients.ErrServiceUnreachable) {
		t.Fatalf("%s: %v, want ErrServiceUnreachable", call, err)
	}
	for _, want := range []string{endpoint, "VpcEndpoints=create", "NAT gateway"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not say %q", call, err, want)
		}
	}
}

// TestAnsweredErrorsAreNotUnreachable: a service that answers with an
// error (moto_server's Secrets Manager, asked for a secret the account does
// not hold) is reached: its error is not blamed on the
// network; and the wrapped API Gateway client still lists keys.
func TestAnsweredErrorsAreNotUnreachable(t *testing.T) {
	env := mototest.Shared(t).Account(t).Env()
	load := func(context.Context) (awsclients.Config, error) { return awsclients.FromEnvironment(envOf(env)) }
	c := awsclients.New(load, nil, nil)
	_, err := c.ReadSecret(context.Background(), "no-such-secret")
	if err == nil || errors.Is(err, awsclients.ErrServiceUnreachable) {
		t.Fatalf("ReadSecret of a missing secret: %v", err)
	}
	api, err := c.APIGateway(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.GetApiKeys(context.Background(), &apigateway.GetApiKeysInput{IncludeValues: aws.Bool(true)}); err != nil {
		t.Fatalf("GetApiKeys through the wrapped client: %v", err)
	}
}
