package ratelimit_test

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// The integer counters as the release before the short reply shipped them:
// the same keys and the same integer in them, a reply of four values per
// limit.
var (
	//go:embed testdata/rolling/sliding_window_v2.lua
	slidingWindowV2 string
	//go:embed testdata/rolling/fixed_window_v2.lua
	fixedWindowV2 string
)

// The counter scripts as the previous release shipped them: the same keys
// and integers, and an import of the layout before the integer counters on
// every key they created (which this release no longer does).
var (
	//go:embed testdata/rolling/sliding_window_v3.lua
	slidingWindowV3 string
	//go:embed testdata/rolling/fixed_window_v3.lua
	fixedWindowV3 string
)

// TestRollingDeployFromIntegerCounters upgrades a deployment to the current
// release from the release whose counter scripts replied with four values
// per limit (v2), and from the previous release (v3). Keys and their
// integers did not change, so both releases count on the same key: whichever instance a request reaches, the caller
// gets exactly the limit in a window, and the next window weighs the
// previous one's count.
func TestRollingDeployFromIntegerCounters(t *testing.T) {
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) // a multiple of the window
	algs := []struct {
		alg  ratelimit.Algorithm
		code string
		v2   string
		// next is how many the next window admits half-way through, after
		// a full window.
		next int
	}{
		{ratelimit.SlidingWindow, "sw", slidingWindowV2, 5},
		{ratelimit.FixedWindow, "fw", fixedWindowV2, 10},
		{ratelimit.SlidingWindow, "sw", slidingWindowV3, 5},
		{ratelimit.FixedWindow, "fw", fixedWindowV3, 10},
	}
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for v, a := range algs {
				t.Run(string(a.alg)+"/from v"+strconv.Itoa(2+v/2), func(t *testing.T) {
					lim := ratelimit.Limit{Name: "user", Count: 10, Window: time.Minute, Algorithm: a.alg}
					clock := testkit.NewClock(base.Add(10 * time.Second))
					l := newLimiter(t, client, ratelimit.Options{KeyPrefix: "roll3", Now: clock.Now})
					id := "caller-v" + strconv.Itoa(2+v/2) + "-" + a.code
					sum := sha256.Sum256([]byte(id))
					key := "roll3:{" + base64.RawURLEncoding.EncodeToString(sum[:16]) + "}:" + a.code + ":user:10/1m"
					v2 := redis.NewScript(a.v2)
					// Requests alternate between an instance not yet upgraded
					// and an upgraded one.
					spend := func(i int) bool {
						if i%2 == 0 {
							v, err := v2.Run(context.Background(), client, []string{key}, "1", lim.Count, lim.Window.Microseconds(), clock.Now().UnixMicro()).Slice()
							if err != nil {
								t.Fatalf("previous release's script: %v", err)
							}
							return v[0] == int64(1)
						}
						d, err := l.Allow(context.Background(), id, lim)
						if err != nil {
							t.Fatal(err)
						}
						return d.Allowed
					}
					admitted := 0
					for i := range 16 {
						if spend(i) {
							admitted++
						}
					}
					if admitted != 10 {
						t.Fatalf("admitted %d in one window across both releases, want the limit, 10", admitted)
					}
					clock.Set(base.Add(90 * time.Second))
					admitted = 0
					for i := range 16 {
						if spend(i + 1) {
							admitted++
						}
					}
					if admitted != a.next {
						t.Fatalf("admitted %d half-way through the next window, want %d", admitted, a.next)
					}
				})
			}
		})
	}
}
