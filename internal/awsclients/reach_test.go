package awsclients_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/apigateway"

	"github.com/slidegate/slidegate/internal/awsclients"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
)

// reachClients are a function's clients sending both services' calls to
// endpoint, one attempt each, logging into the returned buffer.
func reachClients(endpoint, region string) (*awsclients.Clients, *bytes.Buffer) {
	env := lambdaEnv()
	env["AWS_REGION"], env["AWS_DEFAULT_REGION"] = region, region
	env["AWS_ENDPOINT_URL"] = endpoint
	env["AWS_MAX_ATTEMPTS"] = "1"
	load := func(context.Context) (awsclients.Config, error) { return awsclients.FromEnvironment(envOf(env)) }
	c := awsclients.New(load, nil, nil)
	var buf bytes.Buffer
	c.SetLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	return c, &buf
}

// reachErrors are the error records logged.
func reachErrors(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["level"] == "ERROR" {
			out = append(out, rec)
		}
	}
	return out
}

// reachCalls reads a secret and lists API keys, twice each.
func reachCalls(c *awsclients.Clients, secretID string) (secretErr, gatewayErr error) {
	ctx := context.Background()
	for range 2 {
		_, secretErr = c.ReadSecret(ctx, secretID)
		api, err := c.APIGateway(ctx)
		if err != nil {
			return secretErr, err
		}
		// The key listing's own budget, as identity.GatewayKeys gives it.
		listCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, gatewayErr = api.GetApiKeys(listCtx, &apigateway.GetApiKeysInput{})
		cancel()
	}
	return secretErr, gatewayErr
}

// TestUnreachableEndpointsLogOneErrorEach: a function whose calls cannot
// reach Secrets Manager or API Gateway (a refused connection, a name that
// does not resolve, no answer in time) logs one error per endpoint per
// process naming it, its interface endpoint's service name and the fix;
// a reachable endpoint (moto_server), even one answering an error, logs
// none. Before: nothing named the endpoint (a read's timeout asked about a
// NAT gateway; the key listing's error said only that the dial failed).
func TestUnreachableEndpointsLogOneErrorEach(t *testing.T) {
	// A listener that accepts and never answers: no answer in time.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	for _, tt := range []struct{ name, endpoint string }{
		{"refused", "http://127.0.0.1:1"},
		{"name does not resolve", "http://secretsmanager.invalid"},
		{"no answer in time", "http://" + silent.Addr().String()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, buf := reachClients(tt.endpoint, "eu-west-1")
			secretErr, gatewayErr := reachCalls(c, "arn:aws:secretsmanager:eu-west-1:123456789012:secret:k")
			if secretErr == nil || gatewayErr == nil || !awsclients.Unreachable(secretErr) || !awsclients.Unreachable(gatewayErr) {
				t.Fatalf("errors %v / %v, want both unreachable", secretErr, gatewayErr)
			}
			recs := reachErrors(t, buf)
			if len(recs) != 2 {
				t.Fatalf("%d error records, want one per endpoint:\n%s", len(recs), buf)
			}
			for i, want := range []struct{ name, service string }{
				{"Secrets Manager", "com.amazonaws.eu-west-1.secretsmanager"},
				{"API Gateway's management API", "com.amazonaws.eu-west-1.apigateway"},
			} {
				msg, _ := recs[i]["msg"].(string)
				if !strings.Contains(msg, "cannot reach "+want.name) || !strings.Contains(msg, want.service) ||
					!strings.Contains(msg, "VpcEndpoints=create") || !strings.Contains(msg, "NAT gateway") || recs[i]["vpcEndpointService"] != want.service {
					t.Errorf("record %d: %v", i, recs[i])
				}
			}
		})
	}
	t.Run("reachable, answering an error too", func(t *testing.T) {
		moto := mototest.Shared(t)
		acct := moto.Account(t)
		id := acct.CreateSecret(t, "reach-test", "value")
		c, buf := reachClients(acct.Endpoint, acct.Region)
		if secretErr, gatewayErr := reachCalls(c, id); secretErr != nil || gatewayErr != nil {
			t.Fatalf("errors %v / %v", secretErr, gatewayErr)
		}
		if _, err := c.ReadSecret(context.Background(), "no-such-secret"); err == nil || awsclients.Unreachable(err) {
			t.Fatalf("a missing secret: %v, want an answer", err)
		}
		if recs := reachErrors(t, buf); len(recs) != 0 {
			t.Fatalf("error records from a reachable endpoint: %v", recs)
		}
	})
}
