package tests

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/golang-jwt/jwt/v5"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
)

// Test credentials of the authorizer tests. The JWT secret is made at run
// time and reaches the function through its environment.
const (
	azIssuer   = "https://auth.example.com/"
	azAudience = "slidegate-example"
	azKey      = "authorizer-test-key-0001"
)

// azEnv is the authorizer's environment for the tests: small limits so that
// every test reaches them quickly, a known key, and HS256 JWTs.
func azEnv(redisURL, jwtSecret string, overrides map[string]string) map[string]string {
	env := map[string]string{
		"REDIS_URL":            redisURL,
		"REDIS_TIMEOUT":        "100ms",
		"RATE_LIMIT_ANONYMOUS": "3/1m",
		"RATE_LIMIT_USER":      "4/1m",
		"RATE_LIMIT_ORG":       "5/1m",
		"RATE_LIMIT_ROUTES":    "POST /auth/*=2/1m",
		"API_KEY_HASHES":       identity.KeyHash(azKey),
		"JWT_ISSUER":           azIssuer,
		"JWT_AUDIENCE":         azAudience,
		"JWT_HS256_SECRET":     jwtSecret,
	}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// azStart runs the authorizer's bootstrap under the emulator.
func azStart(t testing.TB, env map[string]string) *lambdatest.RIE {
	t.Helper()
	return lambdatest.StartRIE(t, lambdatest.BuildBootstrap(t, "./functions/authorizer"), env)
}

// azToken signs an HS256 JWT for sub with the given secret, valid for an
// hour.
func azToken(t testing.TB, secret, sub string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": azIssuer, "aud": azAudience, "sub": sub,
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
	})
	s, err := tok.SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// azRequest describes a REST REQUEST authorizer event.
type azRequest struct {
	method, path, ip, stage string
	headers                 map[string]string
	stageVars               map[string]string
}

// azRESTEvent builds a real-shaped REST API REQUEST authorizer event.
func azRESTEvent(t testing.TB, r azRequest) []byte {
	t.Helper()
	if r.method == "" {
		r.method = "GET"
	}
	if r.path == "" {
		r.path = "/v1/items"
	}
	if r.stage == "" {
		r.stage = "prod"
	}
	headers := map[string]string{"Host": "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com", "User-Agent": "slidegate-test"}
	for k, v := range r.headers {
		headers[k] = v
	}
	ev := events.APIGatewayCustomAuthorizerRequestTypeRequest{
		Type:           "REQUEST",
		MethodArn:      "arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/" + r.stage + "/" + r.method + r.path,
		Resource:       r.path,
		Path:           r.path,
		HTTPMethod:     r.method,
		Headers:        headers,
		StageVariables: r.stageVars,
		RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{
			Path: "/" + r.stage + r.path, AccountID: "123456789012", Stage: r.stage,
			RequestID: "test", ResourcePath: r.path, HTTPMethod: r.method, APIID: "a1b2c3d4e5",
			Identity: events.APIGatewayCustomAuthorizerRequestTypeRequestIdentity{SourceIP: r.ip},
		},
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// azAnswer is the authorizer's answer to one event.
type azAnswer struct {
	resp         events.APIGatewayCustomAuthorizerResponse
	unauthorized bool  // the function answered "Unauthorized"
	err          error // any other function error
}

func (a azAnswer) allowed() bool {
	return a.err == nil && !a.unauthorized && len(a.resp.PolicyDocument.Statement) == 1 && a.resp.PolicyDocument.Statement[0].Effect == "Allow"
}

func (a azAnswer) denied() bool {
	return a.err == nil && !a.unauthorized && len(a.resp.PolicyDocument.Statement) == 1 && a.resp.PolicyDocument.Statement[0].Effect == "Deny"
}

// ctxInt reads a numeric context value as it arrives in JSON.
func (a azAnswer) ctxInt(key string) (int64, bool) {
	switch v := a.resp.Context[key].(type) {
	case float64:
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// azInvoke sends one event; transport failures fail the test.
func azInvoke(t testing.TB, rie *lambdatest.RIE, event []byte) azAnswer {
	t.Helper()
	body, err := rie.Invoke(t, event)
	var fe *lambdatest.FunctionError
	switch {
	case errors.As(err, &fe) && fe.Message == "Unauthorized":
		return azAnswer{unauthorized: true}
	case errors.As(err, &fe):
		return azAnswer{err: fe}
	case err != nil:
		t.Fatalf("invoke: %v", err)
	}
	var a azAnswer
	if err := json.Unmarshal(body, &a.resp); err != nil {
		t.Fatalf("authorizer response %s: %v", body, err)
	}
	return a
}

// azReadEvent reads a file of events/.
func azReadEvent(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// azHTTPEvent builds a real-shaped HTTP API (payload 2.0) authorizer event
// for r, on r.stage ("$default" when empty).
func azHTTPEvent(t testing.TB, r azRequest) []byte {
	t.Helper()
	if r.method == "" {
		r.method = "GET"
	}
	if r.path == "" {
		r.path = "/v1/items"
	}
	if r.stage == "" {
		r.stage = "$default"
	}
	rawPath := r.path
	if r.stage != "$default" {
		rawPath = "/" + r.stage + r.path
	}
	headers := map[string]string{"host": "f9e8d7c6b5.execute-api.us-east-1.amazonaws.com", "user-agent": "slidegate-test"}
	for k, v := range r.headers {
		headers[strings.ToLower(k)] = v // as an HTTP API sends them
	}
	ev := events.APIGatewayV2CustomAuthorizerV2Request{
		Version:        "2.0",
		Type:           "REQUEST",
		RouteArn:       "arn:aws:execute-api:us-east-1:123456789012:f9e8d7c6b5/" + r.stage + "/" + r.method + r.path,
		RouteKey:       "$default",
		RawPath:        rawPath,
		Headers:        headers,
		StageVariables: r.stageVars,
	}
	ev.RequestContext.AccountID = "123456789012"
	ev.RequestContext.APIID = "f9e8d7c6b5"
	ev.RequestContext.Stage = r.stage
	ev.RequestContext.HTTP.Method = r.method
	ev.RequestContext.HTTP.Path = rawPath
	ev.RequestContext.HTTP.SourceIP = r.ip
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// azHTTPInvoke sends one HTTP API authorizer event and reads its simple
// response; a function error fails the test (an HTTP API would answer it
// with a bare 500).
func azHTTPInvoke(t testing.TB, rie *lambdatest.RIE, event []byte) events.APIGatewayV2CustomAuthorizerSimpleResponse {
	t.Helper()
	body, err := rie.Invoke(t, event)
	if err != nil {
		t.Fatalf("HTTP API authorizer answered with an error (a 500 at the gateway): %v", err)
	}
	var resp events.APIGatewayV2CustomAuthorizerSimpleResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("simple response %s: %v", body, err)
	}
	return resp
}
