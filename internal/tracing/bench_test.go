//go:build !noxray && !otel

package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// benchLimit never denies within a benchmark run.
var benchLimit = ratelimit.Limit{Name: "anonymous", Count: ratelimit.MaxCount, Window: time.Second}

// BenchmarkRedisHookUntraced is what the hook costs a decision outside a
// trace (tests, `make local`, invocations Lambda does not sample): the same
// decision on the same server, in the same run, from a client without the
// hook and from one with it, WithTier included.
func BenchmarkRedisHookUntraced(b *testing.B) {
	server := redistest.StartServer(b)
	for _, bc := range []struct {
		name       string
		instrument bool
	}{
		{"without-hook", false},
		{"with-hook", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchmarkDecisions(b, server, bc.instrument, context.Background())
		})
	}
}

// BenchmarkRedisHookTraced is the cost of a sampled decision: one
// subsegment built, marshalled and written to a daemon that drops it, with
// the SDK's messages going to a production logger (JSON at info level).
func BenchmarkRedisHookTraced(b *testing.B) {
	for _, v := range []string{"AWS_XRAY_DAEMON_ADDRESS", "AWS_XRAY_SDK_DISABLED", "AWS_XRAY_CONTEXT_MISSING"} {
		b.Setenv(v, "")
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if err := tracing.Configure(tracing.Options{Logger: logger, DaemonAddr: discardingDaemon(b)}); err != nil {
		b.Fatal(err)
	}
	server := redistest.StartServer(b)
	benchmarkDecisions(b, server, true, newLambdaTrace().ctx)
}

func benchmarkDecisions(b *testing.B, server *redistest.Server, instrument bool, ctx context.Context) {
	client := newClient(b, redisclient.Config{URL: server.URL()})
	if instrument {
		tracing.Instrument(client)
	}
	limiter := newLimiter(b, client)
	if err := limiter.LoadScripts(context.Background()); err != nil {
		b.Fatal(err)
	}
	check := ratelimit.Check{Identity: b.Name(), Limit: benchLimit}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := limiter.Decide(tracing.WithTier(ctx, "anonymous"), 1, check); err != nil {
			b.Fatal(err)
		}
	}
}

// discardingDaemon is a loopback UDP address that reads and drops every
// datagram until b ends.
func discardingDaemon(b *testing.B) string {
	b.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()
	return conn.LocalAddr().String()
}
