package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

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
	status := writeGatewayResponse(spec, rec, ResponseAccessDenied, renderContext{
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
	writeGatewayResponse(spec, rec, ResponseUnauthorized, renderContext{requestHeaders: http.Header{}})
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
