package gateway

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParameterOverrides(t *testing.T) {
	const file = `version = 0.1
[default.deploy.parameters]
parameter_overrides = "StageName=default A=1"

[dev.global.parameters]
parameter_overrides = "FromGlobal=yes"

[dev.deploy.parameters]
stack_name = "x"
parameter_overrides = "StageName=dev RateLimitAnonymous=30/1m Quoted=\"a b\" Subnets=subnet-1,subnet-2"

[list.deploy.parameters]
parameter_overrides = [
  "A=1",
  'B=two words',
]

[global.global.parameters]
parameter_overrides = 'Only=global'
`
	path := filepath.Join(t.TempDir(), "samconfig.toml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		env  string
		want map[string]string
	}{
		{"dev", map[string]string{"StageName": "dev", "RateLimitAnonymous": "30/1m", "Quoted": "a b", "Subnets": "subnet-1,subnet-2"}},
		{"list", map[string]string{"A": "1", "B": "two words"}},
		{"global", map[string]string{"Only": "global"}},
		{"absent", map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			got, err := ParameterOverrides(path, c.env)
			if err != nil {
				t.Fatalf("%v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	spec := &Spec{Routes: []Route{
		{Method: "GET", Resource: "/{proxy+}", Function: "Proxy"},
		{Method: "GET", Resource: "/items/{id}", Function: "Item"},
		{Method: "GET", Resource: "/items/special", Function: "Special"},
		{Method: "ANY", Resource: "/any", Function: "Any"},
	}}
	sortRoutes(spec.Routes)
	cases := []struct {
		method, path string
		function     string
		params       map[string]string
	}{
		{"GET", "/items/special", "Special", map[string]string{}},
		{"GET", "/items/42", "Item", map[string]string{"id": "42"}},
		{"GET", "/a/b/c", "Proxy", map[string]string{"proxy": "a/b/c"}},
		{"DELETE", "/any", "Any", map[string]string{}},
		{"POST", "/items/42", "", nil},
		{"GET", "/", "", nil},
	}
	for _, c := range cases {
		r, params, ok := spec.Match(c.method, c.path)
		if c.function == "" {
			if ok {
				t.Errorf("%s %s: matched %s, want no route", c.method, c.path, r.Function)
			}
			continue
		}
		if !ok || r.Function != c.function || !reflect.DeepEqual(params, c.params) {
			t.Errorf("%s %s: got %s %v (%v), want %s %v", c.method, c.path, r.Function, params, ok, c.function, c.params)
		}
	}
}

func TestGatewayResponseRendering(t *testing.T) {
	spec := &Spec{Responses: map[string]GatewayResponse{
		ResponseAccessDenied: {
			StatusCode: 429,
			Headers: map[string]string{
				"Retry-After":  "context.authorizer.retryAfter",
				"Missing":      "context.authorizer.absent",
				"Static":       "'fixed'",
				"X-Echo-Agent": "method.request.header.User-Agent",
			},
			Templates: map[string]string{"application/json": `{"n":$context.authorizer.retryAfter,"s":"${context.authorizer.tier}","t":"$context.error.responseType","v":"$stageVariables.v"}`},
		},
	}}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("User-Agent", "ua")
	status := spec.writeGatewayResponse(rec, ResponseAccessDenied, renderContext{
		authorizer:     map[string]any{"retryAfter": float64(18), "tier": "anonymous"},
		stageVariables: map[string]string{"v": "sv"},
		requestHeaders: req.Header,
	})
	if status != 429 || rec.Code != 429 {
		t.Errorf("status %d/%d, want 429", status, rec.Code)
	}
	wantHeaders := map[string]string{"Retry-After": "18", "Static": "fixed", "X-Echo-Agent": "ua", "Missing": "", "Content-Type": "application/json"}
	for k, v := range wantHeaders {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("header %s: %q, want %q", k, got, v)
		}
	}
	if want := `{"n":18,"s":"anonymous","t":"ACCESS_DENIED","v":"sv"}`; rec.Body.String() != want {
		t.Errorf("body %s, want %s", rec.Body.String(), want)
	}

	// A type the template leaves alone gets API Gateway's default.
	rec = httptest.NewRecorder()
	spec.writeGatewayResponse(rec, ResponseUnauthorized, renderContext{requestHeaders: http.Header{}})
	if rec.Code != 401 || rec.Body.String() != `{"message":"Unauthorized"}` {
		t.Errorf("default UNAUTHORIZED: %d %s", rec.Code, rec.Body.String())
	}
}

func TestPolicyEvaluation(t *testing.T) {
	const arn = "arn:aws:execute-api:us-east-1:123456789012:localapi/dev/GET/v1/items"
	cases := []struct {
		name   string
		policy string
		allows bool
	}{
		{"allow exact", `{"Effect":"Allow","Action":"execute-api:Invoke","Resource":"` + arn + `"}`, true},
		{"allow list and wildcard", `{"Effect":"Allow","Action":["execute-api:*"],"Resource":["arn:aws:execute-api:us-east-1:123456789012:localapi/dev/*"]}`, true},
		{"deny", `{"Effect":"Deny","Action":"execute-api:Invoke","Resource":"` + arn + `"}`, false},
		{"allow other method", `{"Effect":"Allow","Action":"execute-api:Invoke","Resource":"arn:aws:execute-api:us-east-1:123456789012:localapi/dev/POST/v1/items"}`, false},
		{"explicit deny wins", `{"Effect":"Allow","Action":"*","Resource":"*"},{"Effect":"Deny","Action":"execute-api:Invoke","Resource":"` + arn + `"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := parseAuthorizerResponse([]byte(`{"principalId":"p","policyDocument":{"Version":"2012-10-17","Statement":[` + c.policy + `]},"context":{"n":1,"s":"x","b":true}}`))
			if err != nil {
				t.Fatalf("%v", err)
			}
			if got := resp.allows(arn); got != c.allows {
				t.Errorf("allows = %v, want %v", got, c.allows)
			}
		})
	}
	bad := []string{
		`{"policyDocument":{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}}`,
		`{"principalId":"p","policyDocument":{"Statement":[]}}`,
		`{"principalId":"p","policyDocument":{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]},"context":{"nested":{"a":1}}}`,
	}
	for _, b := range bad {
		if _, err := parseAuthorizerResponse([]byte(b)); err == nil {
			t.Errorf("accepted %s", b)
		}
	}
}

func TestLoadTemplate(t *testing.T) {
	spec, err := Load("../../../template.yaml", "../../../samconfig.toml", "prod")
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !spec.HasAuthorizer || len(spec.IdentityHeaders) != 0 {
		t.Errorf("authorizer %v, identity headers %v", spec.HasAuthorizer, spec.IdentityHeaders)
	}
	if got := spec.StageVariables["rateLimitAnonymous"]; got == "" {
		t.Errorf("no rateLimitAnonymous stage variable")
	}
	for _, typ := range []string{ResponseAccessDenied, ResponseAuthorizerFailure, ResponseAuthorizerConfig} {
		if _, ok := spec.Responses[typ]; !ok {
			t.Errorf("no %s gateway response", typ)
		}
	}
	if r, _, ok := spec.Match("GET", "/health"); !ok || r.Authorized {
		t.Errorf("GET /health: %+v %v, want an unauthorized route", r, ok)
	}
	for name := range spec.Environment {
		if awsOnlyVariables[name] {
			t.Errorf("environment keeps AWS-only %s", name)
		}
	}
}
