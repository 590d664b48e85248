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

// The sliding-window and fixed-window scripts as the release before the
// integer counters shipped them: their keys ended in ":<count>:<window ms>"
// and held "<index>:<current>:<previous>" and "<index>:<count>".
var (
	//go:embed testdata/rolling/sliding_window_v1.lua
	slidingWindowV1 string
	//go:embed testdata/rolling/fixed_window_v1.lua
	fixedWindowV1 string
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

// v1Key is the key the previous release used for the limit "user" of id.
func v1Key(prefix, code, id string, lim ratelimit.Limit) string {
	sum := sha256.Sum256([]byte(id))
	return prefix + ":{" + base64.RawURLEncoding.EncodeToString(sum[:16]) + "}:" + code + ":" + lim.Name + ":" +
		strconv.FormatInt(lim.Count, 10) + ":" + strconv.FormatInt(lim.Window.Milliseconds(), 10)
}

// v1Spend runs the previous release's script once at now, as an instance
// not yet upgraded would, and reports whether it admitted the request.
func v1Spend(t *testing.T, client redis.UniversalClient, src, key string, lim ratelimit.Limit, now time.Time) bool {
	t.Helper()
	v, err := redis.NewScript(src).Run(context.Background(), client, []string{key},
		now.UnixMicro(), "1", "1", lim.Count, lim.Window.Microseconds(), lim.Count).Slice()
	if err != nil {
		t.Fatalf("previous release's script: %v", err)
	}
	return v[0] == int64(1)
}

// TestRollingDeployKeepsCounts upgrades a deployment from the previous key
// layout to the current one while both run: an upgraded instance carries
// over the count a caller built up on instances not yet upgraded (in the
// same window, and as the previous window of the sliding counter), and an
// instance not yet upgraded keeps deciding on its own key, without an error
// and without starting over, after upgraded instances have decided.
func TestRollingDeployKeepsCounts(t *testing.T) {
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) // a multiple of the window
	algs := []struct {
		alg  ratelimit.Algorithm
		code string
		v1   string
	}{
		{ratelimit.SlidingWindow, "sw", slidingWindowV1},
		{ratelimit.FixedWindow, "fw", fixedWindowV1},
	}
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, a := range algs {
				lim := ratelimit.Limit{Name: "user", Count: 10, Window: time.Minute, Algorithm: a.alg}
				admit := func(t *testing.T, l *ratelimit.Limiter, id string, tries int) int {
					t.Helper()
					n := 0
					for range tries {
						d, err := l.Allow(context.Background(), id, lim)
						if err != nil {
							t.Fatal(err)
						}
						if d.Allowed {
							n++
						}
					}
					return n
				}
				t.Run(string(a.alg)+"/same window", func(t *testing.T) {
					clock := testkit.NewClock(base.Add(10 * time.Second))
					l := newLimiter(t, client, ratelimit.Options{KeyPrefix: "roll1", Now: clock.Now})
					id := "caller-same-" + a.code
					for range 4 {
						if !v1Spend(t, client, a.v1, v1Key("roll1", a.code, id, lim), lim, clock.Now()) {
							t.Fatal("previous release denied below the limit")
						}
					}
					clock.Advance(time.Second)
					if got := admit(t, l, id, 20); got != 6 {
						t.Fatalf("upgraded instance admitted %d after 4 on the previous release, want 6 (10 in all)", got)
					}
					// The instance not yet upgraded keeps its own count: 4
					// spent, so 6 more, and no error.
					n := 0
					for range 20 {
						if v1Spend(t, client, a.v1, v1Key("roll1", a.code, id, lim), lim, clock.Now()) {
							n++
						}
					}
					if n != 6 {
						t.Fatalf("previous release admitted %d more after the upgrade decided, want 6 (it must not start over)", n)
					}
				})
				if a.alg != ratelimit.SlidingWindow {
					continue
				}
				t.Run(string(a.alg)+"/previous window", func(t *testing.T) {
					clock := testkit.NewClock(base.Add(10 * time.Second))
					l := newLimiter(t, client, ratelimit.Options{KeyPrefix: "roll2", Now: clock.Now})
					id := "caller-prev-" + a.code
					for range 10 {
						v1Spend(t, client, a.v1, v1Key("roll2", a.code, id, lim), lim, clock.Now())
					}
					// Half-way through the next window the previous one's 10
					// weigh 5: 5 fit.
					clock.Set(base.Add(90 * time.Second))
					if got := admit(t, l, id, 20); got != 5 {
						t.Fatalf("upgraded instance admitted %d half-way through the window after a full one, want 5", got)
					}
				})
			}
		})
	}
}

// TestRollingDeployFromIntegerCounters upgrades a deployment from the
// release whose counter scripts replied with four values per limit to the
// current one. Keys and their integers did not change, so both releases
// count on the same key: whichever instance a request reaches, the caller
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
	}
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, a := range algs {
				t.Run(string(a.alg), func(t *testing.T) {
					lim := ratelimit.Limit{Name: "user", Count: 10, Window: time.Minute, Algorithm: a.alg}
					clock := testkit.NewClock(base.Add(10 * time.Second))
					l := newLimiter(t, client, ratelimit.Options{KeyPrefix: "roll3", Now: clock.Now})
					id := "caller-v2-" + a.code
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
