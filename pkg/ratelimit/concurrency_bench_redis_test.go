package ratelimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// BenchmarkConcurrency measures what an in-flight limit adds to a request
// on a local redis-server: one acquire and one release (two EVALSHA
// round trips, concurrency_acquire.lua and concurrency_release.lua),
// beside one rate decision (one EVALSHA of sliding_window.lua), and the
// two together, as the API function makes them for a request. Each runs
// over 1,000 identities, with limits no run can fill: every acquire takes
// a slot, every release gives one back, every decision admits. Compare
// the lines of one run side by side; for rounds interleaved (-count runs
// each line's rounds back to back), run the binary once per round:
//
//	go test -c -o /tmp/ratelimit.test ./pkg/ratelimit
//	for i in 1 2 3 4 5; do /tmp/ratelimit.test -test.run '^$' -test.bench BenchmarkConcurrency -test.benchmem; done
//
// The Redis side alone, without the client and the network, is measured
// with redis-benchmark and INFO commandstats (docs/design.md).
func BenchmarkConcurrency(b *testing.B) {
	server := redistest.StartServer(b)
	client := server.Client(b)
	ctx := context.Background()
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if err := limiter.LoadScripts(ctx); err != nil {
		b.Fatal(err)
	}
	rate := ratelimit.Limit{Name: "user", Count: 1_000_000, Window: 15 * time.Minute}
	slots := ratelimit.ConcurrencyLimit{Name: "user", Max: 1000, Lease: 15*time.Minute + 5*time.Second}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "bench-user-" + strconv.Itoa(i)
	}
	decide := func(b *testing.B, id string) {
		if res, err := allowOne(limiter, ctx, id, rate); err != nil || !res.Allowed {
			b.Fatalf("decide: %+v, %v", res, err)
		}
	}
	hold := func(b *testing.B, id string) {
		slot, err := ratelimit.LimiterAcquire(limiter, ctx, id, slots)
		if err != nil || !slot.Acquired {
			b.Fatalf("acquire: %+v, %v", slot, err)
		}
		if released, err := ratelimit.LimiterRelease(limiter, ctx, slot); err != nil || !released {
			b.Fatalf("release: %v, %v", released, err)
		}
	}
	for _, c := range []struct {
		name string
		run  func(b *testing.B, id string)
	}{
		{"decide/sliding-window", decide},
		{"acquire+release", hold},
		{"decide+acquire+release", func(b *testing.B, id string) { decide(b, id); hold(b, id) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.run(b, ids[i%len(ids)])
				i++
			}
		})
	}
}
