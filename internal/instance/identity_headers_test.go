package instance_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestIdentityHeaderCaseFolding: when a request carries header names that
// differ only in case, the exactly lower-case one is used, else the first
// in byte order; the same request always gets the same answer, whatever
// the order a map hands its names out in.
func TestIdentityHeaderCaseFolding(t *testing.T) {
	srv := redistest.StartServer(t)
	rt, _ := idRuntime(t, map[string]string{
		"REDIS_URL":            srv.URL(),
		"REDIS_TIMEOUT":        "100ms",
		"RATE_LIMIT_ANONYMOUS": "1000/1m",
		"RATE_LIMIT_ORG":       "1000/1m",
		"API_KEY_HASHES":       identity.KeyHash("good-key"),
	}, instance.Options{})
	cases := []struct {
		name    string
		headers map[string]string
		wantOrg bool
	}{
		{"lower-case spelling wins", map[string]string{"X-API-KEY": "bad-key", "X-Api-Key": "bad-key", "x-api-key": "good-key"}, true},
		{"lower-case spelling wins, the other way round", map[string]string{"X-Api-Key": "good-key", "x-api-key": "bad-key"}, false},
		{"no lower-case spelling: first in byte order (X-API-KEY < X-Api-Key)", map[string]string{"X-Api-Key": "bad-key", "X-API-KEY": "good-key"}, true},
		{"no lower-case spelling: first in byte order (X-Api-Key < x-API-key)", map[string]string{"x-API-key": "bad-key", "X-Api-Key": "good-key"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 50; i++ {
				ev := events.APIGatewayCustomAuthorizerRequestTypeRequest{HTTPMethod: "GET", Path: "/v1/items", Headers: tc.headers}
				ev.RequestContext.Identity.SourceIP = "198.51.100.9"
				o, err := rt.Decide(context.Background(), apigw.FromRESTAuthorizer(context.Background(), ev))
				if err != nil {
					t.Fatal(err)
				}
				if got := o.Caller.Tier == identity.TierOrg; got != tc.wantOrg {
					t.Fatalf("attempt %d: org = %v, want %v (unauthorized %v)", i, got, tc.wantOrg, o.Unauthorized())
				}
			}
		})
	}
}
