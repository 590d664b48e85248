package apihandler_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestAPIFunctionCountsIPv6PerPrefix: the API function (REST and HTTP API
// proxy events, without an authorizer's decision) counts the addresses of
// one /64 as one caller, like the authorizer: with the anonymous limit at
// 3/1m, the fourth address of the /64 gets the 429.
func TestAPIFunctionCountsIPv6PerPrefix(t *testing.T) {
	srv := redistest.StartServer(t)
	api := apitest.Start(t, apitest.Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": "3/1m"}))
	cases := []struct {
		name  string
		event func(ip string) []byte
	}{
		{"REST proxy event", func(ip string) []byte {
			return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) { e.RequestContext.Identity.SourceIP = ip })
		}},
		{"HTTP API event", func(ip string) []byte {
			return apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) { e.RequestContext.HTTP.SourceIP = ip })
		}},
	}
	for n, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var codes []int
			for i := range 4 {
				resp := apitest.Invoke(t, api, tc.event(fmt.Sprintf("2001:db8:%x:1:%x::1", 0x40+n, i)))
				codes = append(codes, resp.StatusCode)
			}
			if !slices.Equal(codes, []int{200, 200, 200, 429}) {
				t.Errorf("four addresses of one /64: %v, want [200 200 200 429]", codes)
			}
		})
	}
}
