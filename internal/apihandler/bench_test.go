package apihandler_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// BenchmarkAPIWarmInvocation measures one warm invocation of the API
// function in-process: a REST (v1) or HTTP API (v2) event through shape
// detection, the proxy adapter, the middleware and the route, deciding on a
// real redis-server. "redis round trip" is a bare PING on the same server,
// "limiter decision alone" the same decision made directly with
// pkg/ratelimit (one script call), and "authorizer context" an invocation that reuses the authorizer's
// decision without Redis, so that the overhead beyond Redis reads off the
// difference. Run with -benchmem.
func BenchmarkAPIWarmInvocation(b *testing.B) {
	srv := redistest.StartServer(b)
	// A limit no benchmark reaches, so that every request is admitted.
	api := apitest.Start(b, apitest.Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": "1000000/1s"}))
	ctx := context.Background()

	b.Run("redis round trip", func(b *testing.B) {
		client := srv.Client(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := client.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("limiter decision alone", func(b *testing.B) {
		limiter, err := ratelimit.NewLimiter(srv.Client(b), ratelimit.Options{KeyPrefix: "bench-api"})
		if err != nil {
			b.Fatal(err)
		}
		check := ratelimit.Check{Identity: "ip:203.0.113.7", Limit: ratelimit.Limit{Name: "anonymous", Count: 1_000_000, Window: time.Second}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := limiter.Decide(ctx, 1, check); err != nil {
				b.Fatal(err)
			}
		}
	})
	cases := []struct {
		name  string
		event []byte
	}{
		{"REST v1", apitest.ReadEvent(b, "api-rest-anonymous.json")},
		{"HTTP API v2", apitest.ReadEvent(b, "api-httpapi-v2.json")},
		{"REST v1 with authorizer context", apitest.ReadEvent(b, "api-rest-with-authorizer-context.json")},
		{"REST v1 health, not limited", apitest.RESTEvent(b, func(e *events.APIGatewayProxyRequest) { e.Path = "/health" })},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := api.Invoke(ctx, c.event)
				if err != nil {
					b.Fatal(err)
				}
				if status := apiStatusOf(out); status != http.StatusOK {
					b.Fatalf("status %d", status)
				}
			}
		})
	}
}

// apiStatusOf reads the status of a proxy response without encoding it.
func apiStatusOf(out any) int {
	switch r := out.(type) {
	case events.APIGatewayProxyResponse:
		return r.StatusCode
	case events.APIGatewayV2HTTPResponse:
		return r.StatusCode
	default:
		panic(fmt.Sprintf("unexpected response type %T", out))
	}
}
