package apihandler

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/slidegate/slidegate/internal/apigw"
)

// TestInvokeTellsShapesApart: the response type follows the event's shape,
// and what is neither shape is a 400, never an error.
func TestInvokeTellsShapesApart(t *testing.T) {
	reached := 0
	h := NewLambdaHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.WriteHeader(http.StatusNoContent)
	}), slog.New(slog.DiscardHandler))
	const (
		rest      = "REST"
		httpAPI   = "HTTP API"
		malformed = "malformed"
	)
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{"REST proxy event", `{"resource":"/x","path":"/x","httpMethod":"GET","requestContext":{"identity":{"sourceIp":"1.2.3.4"}}}`, rest},
		{"HTTP API payload 1.0 is the REST shape", `{"version":"1.0","path":"/x","httpMethod":"GET"}`, rest},
		{"HTTP API payload 2.0", `{"version":"2.0","rawPath":"/x","requestContext":{"http":{"method":"GET","sourceIp":"1.2.3.4"}}}`, httpAPI},
		{"HTTP API with a lambda authorizer", `{"version":"2.0","rawPath":"/x","requestContext":{"http":{"method":"GET"},"authorizer":{"lambda":{"tier":"org"}}}}`, httpAPI},
		{"version 2.0 without http.method", `{"version":"2.0","rawPath":"/x"}`, malformed},
		{"empty object", `{}`, malformed},
		{"not JSON", `GET / HTTP/1.1`, malformed},
		{"wrong type for httpMethod", `{"httpMethod":7}`, malformed},
		{"REST method net/http refuses", `{"httpMethod":"G T","path":"/x"}`, malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := reached
			out, err := h.Invoke(context.Background(), []byte(tt.payload))
			if err != nil {
				t.Fatalf("Invoke returned an error: %v", err)
			}
			got := malformed
			switch r := out.(type) {
			case events.APIGatewayV2HTTPResponse:
				got = httpAPI
			case events.APIGatewayProxyResponse:
				if r.StatusCode != http.StatusBadRequest {
					got = rest
				}
			default:
				t.Fatalf("response of type %T", out)
			}
			if got != tt.want {
				t.Fatalf("served as %s, want %s (%+v)", got, tt.want, out)
			}
			if wantReached := tt.want != malformed; (reached > before) != wantReached {
				t.Fatalf("handler reached: %v, want %v", reached > before, wantReached)
			}
		})
	}
}

// TestReadRequest runs real events through the real proxy adapters and
// checks what the handler reads from them: the source address of the
// request context (never X-Forwarded-For), the stage variables, the
// authorizer's context, lower-case headers, and the path without an HTTP
// API's stage.
func TestReadRequest(t *testing.T) {
	authorizer := map[string]any{"tier": "org", "limit": "10000"}
	tests := []struct {
		name     string
		invoke   func(h http.Handler) error
		want     apigw.Request
		wantAuth map[string]any
		wantPath string
	}{
		{
			name: "REST",
			invoke: func(h http.Handler) error {
				_, err := httpadapter.New(h).ProxyWithContext(context.Background(), events.APIGatewayProxyRequest{
					HTTPMethod: "post", Path: "/auth/login",
					Headers:        map[string]string{"X-Forwarded-For": "198.51.100.1", "X-Api-Key": "k"},
					StageVariables: map[string]string{"rateLimitAnonymous": "10/1m"},
					RequestContext: events.APIGatewayProxyRequestContext{
						Identity:   events.APIGatewayRequestIdentity{SourceIP: "203.0.113.7"},
						Authorizer: authorizer,
						DomainName: "api.example.com",
						APIID:      "a1b2c3d4e5",
						Stage:      "dev",
					},
				})
				return err
			},
			want:     apigw.Request{APIID: "a1b2c3d4e5", Stage: "dev"},
			wantAuth: authorizer,
		},
		{
			name: "HTTP API on a named stage",
			invoke: func(h http.Handler) error {
				_, err := httpadapter.NewV2(h).ProxyWithContext(context.Background(), events.APIGatewayV2HTTPRequest{
					Version: "2.0", RawPath: "/prod/auth/login",
					Headers:        map[string]string{"x-forwarded-for": "198.51.100.1", "x-api-key": "k"},
					StageVariables: map[string]string{"rateLimitAnonymous": "10/1m"},
					RequestContext: events.APIGatewayV2HTTPRequestContext{
						Stage:      "prod",
						HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", SourceIP: "203.0.113.7"},
						Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: authorizer},
					},
				})
				return err
			},
			wantAuth: authorizer,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got apigw.Request
			var gotAuth map[string]any
			h := stripStage(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, gotAuth = readRequest(r)
				w.WriteHeader(http.StatusNoContent)
			}))
			if err := tt.invoke(h); err != nil {
				t.Fatal(err)
			}
			if got.Method != "POST" || got.Path != "/auth/login" || got.SourceIP != "203.0.113.7" {
				t.Errorf("read %s %s from %q, want POST /auth/login from 203.0.113.7", got.Method, got.Path, got.SourceIP)
			}
			if got.Headers["x-api-key"] != "k" || got.Headers["x-forwarded-for"] != "198.51.100.1" {
				t.Errorf("headers %v: want lower-case names", got.Headers)
			}
			if got.StageVariables["rateLimitAnonymous"] != "10/1m" {
				t.Errorf("stage variables %v", got.StageVariables)
			}
			if got.APIID != tt.want.APIID || got.Stage != tt.want.Stage {
				t.Errorf("API %q stage %q, want %q %q: API keys would be checked against the wrong usage plans", got.APIID, got.Stage, tt.want.APIID, tt.want.Stage)
			}
			if !reflect.DeepEqual(gotAuth, tt.wantAuth) {
				t.Errorf("authorizer context %v, want %v", gotAuth, tt.wantAuth)
			}
		})
	}

	t.Run("a local request is counted by its TCP peer, not its headers", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/v1/items", nil)
		r.RemoteAddr = "192.0.2.9:53211"
		r.Header.Set("X-Forwarded-For", "198.51.100.1")
		if got, auth := readRequest(r); got.SourceIP != "192.0.2.9" || auth != nil {
			t.Fatalf("local request read as %+v, authorizer %v", got, auth)
		}
	})
}
