package authorizer_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// BenchmarkAuthorizerHandler measures the function's own work for one
// event in process (decode, resolve, one script call, encode), without the
// emulator's HTTP hop; µs-redis-ping is the bare round trip it contains.
func BenchmarkAuthorizerHandler(b *testing.B) {
	srv := redistest.StartServer(b)
	env := map[string]string{
		"REDIS_URL":            srv.URL(),
		"REDIS_TIMEOUT":        "100ms",
		"RATE_LIMIT_ANONYMOUS": "1000000/1h",
		"RATE_LIMIT_ROUTES":    "POST /auth/*=2/1m",
		"API_KEY_HASHES":       "1f3fda5b3594c211778c561901737661ca21e8ebcf1ac1a3d60f006c470129f8",
		"JWT_ISSUER":           "https://auth.example.com/",
		"JWT_AUDIENCE":         "slidegate-example",
		"JWT_HS256_SECRET":     "bench-hs256-secret-for-tests-0123456789",
	}
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] }, instance.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	h := authorizer.New(rt)
	event, err := json.Marshal(restEvent("GET", "/v1/items", "192.0.2.3", nil))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Invoke(context.Background(), event); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(srv.PingMicros(b), "µs-redis-ping")
}
