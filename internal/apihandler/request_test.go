package apihandler

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/slidegate/slidegate/internal/app"
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
		want     gatewayRequest
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
			want: gatewayRequest{Authorizer: authorizer, Request: app.Request{APIID: "a1b2c3d4e5", Stage: "dev"}},
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
			want: gatewayRequest{Authorizer: authorizer},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got gatewayRequest
			h := stripStage(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = readRequest(r)
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
			if !reflect.DeepEqual(got.Authorizer, tt.want.Authorizer) {
				t.Errorf("authorizer context %v, want %v", got.Authorizer, tt.want.Authorizer)
			}
		})
	}

	t.Run("a local request is counted by its TCP peer, not its headers", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/v1/items", nil)
		r.RemoteAddr = "192.0.2.9:53211"
		r.Header.Set("X-Forwarded-For", "198.51.100.1")
		if got := readRequest(r); got.SourceIP != "192.0.2.9" || got.Authorizer != nil {
			t.Fatalf("local request read as %+v", got)
		}
	})
}

// TestLowerHeadersKeepsCredentials: a request with more headers than
// maxHeaders keeps its x-api-key and Authorization whatever their names
// sort like, and the others it keeps are the same on every call (the first
// by sorted name), never chosen by map iteration order.
func TestLowerHeadersKeepsCredentials(t *testing.T) {
	h := http.Header{}
	for i := range 2 * maxHeaders {
		// Names on both sides of the credentials' in sorted order.
		h.Set(fmt.Sprintf("A-Pad-%03d", i), "x")
		h.Set(fmt.Sprintf("Z-Pad-%03d", i), "x")
	}
	h.Set("X-Api-Key", "unknown-key")
	h.Set("Authorization", "Bearer not-a-jwt")
	h["X-Empty"] = nil

	first := lowerHeaders(h)
	if len(first) != maxHeaders {
		t.Fatalf("kept %d headers, want %d", len(first), maxHeaders)
	}
	if first["x-api-key"] != "unknown-key" || first["authorization"] != "Bearer not-a-jwt" {
		t.Fatalf("credentials dropped: x-api-key %q, authorization %q", first["x-api-key"], first["authorization"])
	}
	for i := range maxHeaders - 2 {
		if name := fmt.Sprintf("a-pad-%03d", i); first[name] != "x" {
			t.Fatalf("%s missing: the kept headers are not the first by sorted name", name)
		}
	}
	for range 50 {
		if got := lowerHeaders(h); !reflect.DeepEqual(got, first) {
			t.Fatal("the same headers gave a different app.Request")
		}
	}

	t.Run("names differing only in case: the lower-case one, else the first in sorted order", func(t *testing.T) {
		tests := []struct {
			h    http.Header
			want string
		}{
			{http.Header{"X-API-KEY": {"upper"}, "X-Api-Key": {"canonical"}, "x-api-key": {"lower"}}, "lower"},
			{http.Header{"X-API-KEY": {"upper"}, "X-Api-Key": {"canonical"}}, "upper"},
			{http.Header{"X-PAD": {"upper"}, "x-pad": {"lower"}}, "lower"},
		}
		for _, tt := range tests {
			for range 50 {
				got := lowerHeaders(tt.h)
				if v := got["x-api-key"] + got["x-pad"]; v != tt.want {
					t.Fatalf("%v read as %q, want %q", tt.h, v, tt.want)
				}
			}
		}
	})
}
