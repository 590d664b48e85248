package apihandler

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// TestUnparseableRequestsNeverQuoteTheURL: an event the proxy library
// could not turn into a request is answered 400 before the library tries
// (it would print the whole URL, query string included, as plain text),
// and the log line names the problem without the query string.
func TestUnparseableRequestsNeverQuoteTheURL(t *testing.T) {
	const secret = "query-secret-0d9a"
	cases := []struct {
		name    string
		event   any
		wantErr string // in the log line; "" when the event is served
	}{
		{"REST: a fine event is served", events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/v1/items",
			QueryStringParameters: map[string]string{"token": secret}}, ""},
		{"REST: a bad escape in the path", events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/v1/items%zz",
			QueryStringParameters: map[string]string{"token": secret}}, "invalid URL escape"},
		{"REST: a control character in the path", events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/v1/\x7fitems"}, "invalid control character"},
		{"REST: a method that is not a token", events.APIGatewayProxyRequest{HTTPMethod: "GE T", Path: "/v1/items"}, "not an HTTP token"},
		{"HTTP API: a fine event is served", httpAPIEvent("GET", "/v1/items", "token="+secret), ""},
		{"HTTP API: a bad escape in the path", httpAPIEvent("GET", "/v1/%zz", "token="+secret), "invalid URL escape"},
		{"HTTP API: a control character in the raw query", httpAPIEvent("GET", "/v1/items", "token="+secret+"\x01"), "invalid control character"},
		{"HTTP API: a method that is not a token", httpAPIEvent("G\nET", "/v1/items", ""), "not an HTTP token"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			served := false
			h := NewLambdaHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served = true
				w.WriteHeader(http.StatusNoContent)
			}), slog.New(slog.NewJSONHandler(&logs, nil)))
			payload, err := json.Marshal(tc.event)
			if err != nil {
				t.Fatal(err)
			}
			ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-req-9"})
			out, err := h.Invoke(ctx, payload)
			if err != nil {
				t.Fatalf("Invoke returned an error: %v", err)
			}
			if tc.wantErr == "" {
				if !served {
					t.Fatalf("a fine event was not served: %+v; log %s", out, logs.String())
				}
				return
			}
			resp, ok := out.(events.APIGatewayProxyResponse)
			if served || !ok || resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("want a 400 without serving, got served=%v %+v", served, out)
			}
			line := logs.String()
			if !strings.Contains(line, tc.wantErr) || !strings.Contains(line, `"lambdaRequestId":"lambda-req-9"`) {
				t.Errorf("log line %s, want %q and the Lambda request id", line, tc.wantErr)
			}
			if strings.Contains(line, secret) || strings.Contains(line, "https://") {
				t.Errorf("log line quotes the URL: %s", line)
			}
		})
	}
}

func httpAPIEvent(method, path, rawQuery string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: path, RawQueryString: rawQuery}
	ev.RequestContext.HTTP.Method = method
	ev.RequestContext.HTTP.Path = path
	return ev
}
