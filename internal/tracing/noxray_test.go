//go:build noxray && !otel

package tracing_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// sampledContext is the context of an invocation Lambda sampled: the one
// the X-Ray build would trace.
func sampledContext() context.Context {
	// The key aws-lambda-go gives the trace header under, a string.
	//lint:ignore SA1029 the key is aws-lambda-go's, not ours
	return context.WithValue(context.Background(), "x-amzn-trace-id",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
}

// TestNoXRayBuildDoesNothing pins the build without X-Ray: the same four
// functions, each a no-op, and a client that still decides.
func TestNoXRayBuildDoesNothing(t *testing.T) {
	if tracing.Tracer != "none" {
		t.Fatalf("Tracer = %q, want none", tracing.Tracer)
	}
	for _, opts := range []tracing.Options{{}, {DaemonAddr: "not an address"}} {
		if err := tracing.Configure(opts); err != nil {
			t.Fatalf("Configure(%+v) = %v, want nil", opts, err)
		}
	}
	ctx := sampledContext()
	if got := tracing.WithTier(ctx, "user"); got != ctx {
		t.Fatal("WithTier returned a new context; without a tracer it must return its own")
	}
	var h lambda.Handler = lambda.NewHandler(func() error { return nil })
	if got := tracing.Handler(h); got != h {
		t.Fatal("Handler(h) is not h")
	}

	// An instrumented client decides on Redis as before.
	server := redistest.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	tracing.Instrument(client)
	lim, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "noxray"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := lim.Allow(tracing.WithTier(ctx, "user"), "198.51.100.23", ratelimit.Limit{Name: "user", Count: 5, Window: time.Minute})
	if err != nil || !res.Allowed {
		t.Fatalf("Allow = %+v, %v; want allowed", res, err)
	}
}
