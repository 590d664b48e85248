package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestDeniedRequestsSpendNothing pins down what several limits decided
// together mean: one limit's denial leaves every other limit untouched, a
// cost of n passes only when all n units fit, and Peek never spends.
func TestDeniedRequestsSpendNothing(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, alg := range ratelimit.Algorithms() {
				t.Run(string(alg), func(t *testing.T) {
					ctx := context.Background()
					clock := testkit.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
					limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "spend", Now: clock.Now})
					id := "caller-" + string(alg)
					tier := ratelimit.Check{Identity: id, Limit: ratelimit.Limit{Name: "user", Count: 600, Window: time.Minute, Algorithm: alg}}
					route := ratelimit.Check{Identity: id, Limit: ratelimit.Limit{Name: "POST /auth/*", Count: 5, Window: time.Minute, Algorithm: alg}}

					admitted := 0
					for range 20 {
						res, err := limiter.Decide(ctx, 1, tier, route)
						if err != nil {
							t.Fatal(err)
						}
						if res.Allowed {
							admitted++
						} else if res.Decisions[1].Allowed {
							t.Fatalf("denial blamed on the wrong limit: %+v", res.Decisions)
						}
					}
					want := int(expectedBurst(alg, 5))
					if admitted != want {
						t.Fatalf("admitted %d through tier+route, want the route's burst %d", admitted, want)
					}
					peek, err := ratelimit.LimiterPeek(limiter, ctx, 1, tier)
					if err != nil {
						t.Fatal(err)
					}
					if wantLeft := expectedBurst(alg, 600) - int64(admitted); peek.Decisions[0].Remaining != wantLeft {
						t.Fatalf("tier has %d remaining after %d admitted and %d denied; want %d (denials must not spend)",
							peek.Decisions[0].Remaining, admitted, 20-admitted, wantLeft)
					}
					// Peeking again changes nothing.
					again, _ := ratelimit.LimiterPeek(limiter, ctx, 1, tier)
					if again.Decisions[0].Remaining != peek.Decisions[0].Remaining {
						t.Fatal("Peek spent")
					}
					if httplimit.Closest(peek).Limit.Name != "user" {
						t.Fatalf("Closest = %q", httplimit.Closest(peek).Limit.Name)
					}
				})
			}
		})
	}
}

// TestCostIsAllOrNothing: a request of cost n passes only when n fit.
func TestCostIsAllOrNothing(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	topo := redistest.StartTopologies(t)[1]
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	limiter := newLimiter(t, topo.NewClient(t), ratelimit.Options{KeyPrefix: "cost", Now: clock.Now})
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingWindow, ratelimit.SlidingLog, ratelimit.TokenBucket, ratelimit.FixedWindow} {
		check := ratelimit.Check{Identity: "batch-" + string(alg), Limit: ratelimit.Limit{Name: "org", Count: 10, Window: time.Minute, Algorithm: alg}}
		steps := []struct {
			cost      int64
			allowed   bool
			remaining int64
		}{{4, true, 6}, {4, true, 2}, {3, false, 2}, {2, true, 0}, {1, false, 0}}
		for i, s := range steps {
			res, err := limiter.Decide(ctx, s.cost, check)
			if err != nil {
				t.Fatal(err)
			}
			d := res.Decisions[0]
			if d.Allowed != s.allowed || d.Remaining != s.remaining {
				t.Fatalf("%s step %d cost %d: allowed=%v remaining=%d, want %v %d", alg, i, s.cost, d.Allowed, d.Remaining, s.allowed, s.remaining)
			}
		}
		if _, err := limiter.Decide(ctx, 11, check); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Fatalf("%s: cost above the limit: err = %v, want ErrInvalid", alg, err)
		}
	}
}

// TestChecksOfDifferentIdentities covers limits that cannot share a slot:
// they are peeked before anything is spent, so a denial by one spends
// nothing on the other.
func TestChecksOfDifferentIdentities(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	topo := redistest.StartTopologies(t)[1]
	ctx := context.Background()
	limiter := newLimiter(t, topo.NewClient(t), ratelimit.Options{KeyPrefix: "cross"})
	ip := ratelimit.Check{Identity: "198.51.100.9", Limit: ratelimit.Limit{Name: "anonymous", Count: 3, Window: time.Minute}}
	key := ratelimit.Check{Identity: "key-1", Limit: ratelimit.Limit{Name: "org", Count: 100, Window: time.Minute}}
	for i := range 5 {
		res, err := limiter.Decide(ctx, 1, key, ip)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if res.Allowed != (i < 3) {
			t.Fatalf("request %d: allowed=%v", i, res.Allowed)
		}
	}
	peek, err := ratelimit.LimiterPeek(limiter, ctx, 1, key)
	if err != nil {
		t.Fatal(err)
	}
	if peek.Decisions[0].Remaining != 97 {
		t.Fatalf("org limit has %d remaining after 3 admitted and 2 denied, want 97", peek.Decisions[0].Remaining)
	}
}

// TestHostileIdentitiesCannotChooseTheirSlot sends identities built to
// steer Redis Cluster's hash tag (braces), break protocols (newlines), or
// strain memory (64 KiB, invalid UTF-8). All are decided, and a caller who
// fixes a "{tag}" prefix still lands all over the cluster.
func TestHostileIdentitiesCannotChooseTheirSlot(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	topo := redistest.StartTopologies(t)[1]
	ctx := context.Background()
	client := topo.NewClient(t)
	limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "hostile"})
	lim := ratelimit.Limit{Name: "anonymous", Count: 2, Window: time.Minute}
	hostile := []string{
		"{victim}", "}{", "{", "}", "{}", "a\nb", "\r\n*3\r\n$3\r\nDEL\r\n",
		string([]byte{0xff, 0xfe, 0xfd}), strings.Repeat("x", 64<<10), strings.Repeat("{", 64<<10), "",
	}
	for _, id := range hostile {
		for i := range 3 {
			d, err := allowOne(limiter, ctx, id, lim)
			if err != nil {
				t.Fatalf("identity %.20q: %v", id, err)
			}
			if d.Allowed != (i < 2) {
				t.Fatalf("identity %.20q request %d: allowed=%v", id, i, d.Allowed)
			}
		}
	}
	slots := map[int64]bool{}
	for i := range 200 {
		if _, err := allowOne(limiter, ctx, fmt.Sprintf("{victim}%d", i), lim); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range topo.Masters(t) {
		iter := m.Scan(ctx, 0, "hostile:*", 1000).Iterator()
		for iter.Next(ctx) {
			slot, err := m.ClusterKeySlot(ctx, iter.Val()).Result()
			if err != nil {
				t.Fatal(err)
			}
			slots[slot] = true
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(slots) < 150 {
		t.Fatalf("211 identities, most sharing a {victim} prefix, landed on only %d slots", len(slots))
	}
}
