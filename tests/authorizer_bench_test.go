package tests

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// BenchmarkAuthorizerColdStart measures a cold start as Lambda has one:
// from starting the emulator process (which starts the bootstrap on the
// first invocation) to the first response, including building the runtime
// (configuration, Redis client, script preload) and the first decision.
// It also reports the size of the host bootstrap (stripped, static).
func BenchmarkAuthorizerColdStart(b *testing.B) {
	srv := redistest.StartServer(b)
	bootstrap := lambdatest.BuildBootstrap(b, "./functions/authorizer")
	env := azEnv(srv.URL(), "bench-hs256-secret-for-tests-0123456789", map[string]string{"RATE_LIMIT_ANONYMOUS": "1000000/1h"})
	event := azRESTEvent(b, azRequest{ip: "192.0.2.1"})
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rie := lambdatest.StartRIE(b, bootstrap, env)
		if _, err := rie.InvokeContext(context.Background(), event); err != nil {
			b.Fatal(err)
		}
		total += time.Since(rie.Started)
		b.StopTimer()
		rie.Stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/cold-start")
	if st, err := os.Stat(bootstrap); err == nil {
		b.ReportMetric(float64(st.Size())/(1<<20), "MiB-bootstrap")
	}
}

// BenchmarkAuthorizerWarmInvocation measures a warm invocation under the
// emulator (emulator HTTP hop included) and, for comparison, the Redis
// round trip (PING) on the same machine.
func BenchmarkAuthorizerWarmInvocation(b *testing.B) {
	srv := redistest.StartServer(b)
	rie := azStart(b, azEnv(srv.URL(), "bench-hs256-secret-for-tests-0123456789", map[string]string{"RATE_LIMIT_ANONYMOUS": "1000000/1h"}))
	event := azRESTEvent(b, azRequest{ip: "192.0.2.2"})
	if _, err := rie.InvokeContext(context.Background(), event); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rie.InvokeContext(context.Background(), event); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(redisPingMicros(b, srv), "µs-redis-ping")
}

// BenchmarkAuthorizerHandler measures the function's own work for one
// event in process (decode, resolve, one script call, encode), without the
// emulator's HTTP hop; µs-redis-ping is the bare round trip it contains.
func BenchmarkAuthorizerHandler(b *testing.B) {
	srv := redistest.StartServer(b)
	env := azEnv(srv.URL(), "bench-hs256-secret-for-tests-0123456789", map[string]string{"RATE_LIMIT_ANONYMOUS": "1000000/1h"})
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] }, instance.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	h := authorizer.New(rt)
	event := azRESTEvent(b, azRequest{ip: "192.0.2.3"})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Invoke(context.Background(), event); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(redisPingMicros(b, srv), "µs-redis-ping")
}

func redisPingMicros(b *testing.B, srv *redistest.Server) float64 {
	c := srv.Client(b)
	const n = 2000
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := c.Ping(context.Background()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Microseconds()) / n
}
