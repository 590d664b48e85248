package tests

import (
	"context"
	"os"
	"testing"
	"time"

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
	b.ReportMetric(srv.PingMicros(b), "µs-redis-ping")
}
