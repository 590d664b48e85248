package ratelimit_test

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// released holds each algorithm's script as the last layout change left
// it (testdata/released, see docs/release.md): a release whose instances
// still run those scripts must count exactly beside one running today's.
//
//go:embed testdata/released/*.lua
var released embed.FS

// TestRollingDeployKeepsCountsExact: requests alternate between an instance
// running the released scripts and one running today's Limiter, on the
// same keys, at one instant, six seconds later, then half-way through the
// next window.
// Whichever instance a request reaches, each admits exactly what today's
// Limiter alone admits for another caller at the same instants.
func TestRollingDeployKeepsCountsExact(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'

	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) // a multiple of the window
	algs := []struct {
		alg        ratelimit.Algorithm
		code, file string
	}{
		{ratelimit.SlidingWindow, "sw", "sliding_window.lua"},
		{ratelimit.FixedWindow, "fw", "fixed_window.lua"},
		{ratelimit.SlidingLog, "sl", "sliding_log.lua"},
		{ratelimit.TokenBucket, "tb", "gcra.lua"},
		{ratelimit.LeakyBucket, "lb", "gcra.lua"},
		{ratelimit.SlidingBuckets, "sb", "sliding_buckets.lua"},
	}
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, a := range algs {
				t.Run(string(a.alg), func(t *testing.T) {
					src, err := released.ReadFile("testdata/released/" + a.file)
					if err != nil {
						t.Fatal(err)
					}
					old := redis.NewScript(string(src))
					lim := ratelimit.Limit{Name: "user", Count: 10, Window: time.Minute, Algorithm: a.alg}
					clock := testkit.NewClock(base.Add(10 * time.Second))
					l := newLimiter(t, client, ratelimit.Options{KeyPrefix: "roll", Now: clock.Now})
					id := "rolling-" + a.code
					sum := sha256.Sum256([]byte(id))
					key := "roll:{" + base64.RawURLEncoding.EncodeToString(sum[:16]) + "}:" + a.code + ":user:1m"
					spend := func(i int) bool {
						if i%2 == 0 {
							args := []any{"1", lim.Count, lim.Window.Microseconds()}
							if a.file == "gcra.lua" {
								args = append(args, lim.Burst())
							}
							v, err := old.Run(context.Background(), client, []string{key}, append(args, clock.Now().UnixMicro())...).Slice()
							if err != nil {
								t.Fatalf("released script: %v", err)
							}
							return v[0] == int64(1)
						}
						d, err := allowOne(l, context.Background(), id, lim)
						if err != nil {
							t.Fatal(err)
						}
						return d.Allowed
					}
					alone := func() int {
						n := 0
						for range 16 {
							d, err := allowOne(l, context.Background(), "alone-"+a.code, lim)
							if err != nil {
								t.Fatal(err)
							}
							if d.Allowed {
								n++
							}
						}
						return n
					}
					for _, at := range []time.Duration{10 * time.Second, 16 * time.Second, 90 * time.Second} {
						clock.Set(base.Add(at))
						admitted := 0
						for i := range 16 {
							if spend(i) {
								admitted++
							}
						}
						if want := alone(); admitted != want {
							t.Fatalf("at +%v: admitted %d across both releases, want %d, what one release admits", at, admitted, want)
						}
					}
				})
			}
		})
	}
}
