package ratelimit

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestEngineStateSurvivesCountChanges pins down issue 38: a limit's state
// records what was spent, whatever the count it is decided with, so that
// neither a scale control (set, then lifted) nor a changed count gives a
// caller back what it spent. Every answer is at one instant of a stepped
// clock, so nothing drains between the steps.
func TestEngineStateSurvivesCountChanges(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			t.Run("scale down then lift", func(t *testing.T) { testScaleThenLiftKeepsCounts(t, client) })
			t.Run("count tightened and loosened", func(t *testing.T) { testCountChangeKeepsCounts(t, client) })
		})
	}
}

// admitted counts the requests of cost 1 check admits at the fixture's
// instant, up to 10,000, on the Limiter that reads controls.
func admitted(t *testing.T, f *controlFixture, check Check) int64 {
	t.Helper()
	n, _ := admitBurst(t, f, check)
	return n
}

// testScaleThenLiftKeepsCounts: a caller spends its whole limit of 20/1h,
// is scaled to x0.25, then lifted: it has nothing more to spend in that
// hour (before the fix, the scale's stored form capped its counts at 5 and
// the lift gave back 15).
func testScaleThenLiftKeepsCounts(t *testing.T, client redis.UniversalClient) {
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "hole-scale")
			id := "scraper-" + string(alg)
			check := Check{Identity: id, Limit: Limit{Name: "anonymous", Count: 20, Window: time.Hour, Algorithm: alg}}
			if n := admitted(t, f, check); n != burstOf(alg, 20) {
				t.Fatalf("20/1h admitted %d at one instant, want %d", n, burstOf(alg, 20))
			}
			f.set(t, id, scale(0.25), time.Hour)
			if n := admitted(t, f, check); n != 0 {
				t.Fatalf("x0.25 after the whole limit was spent admitted %d, want 0", n)
			}
			f.lift(t, id)
			f.limiter.watch.Invalidate()
			if n := admitted(t, f, check); n != 0 {
				t.Fatalf("lifted: admitted %d more in the same hour, want 0", n)
			}
			// The scale's end, rather than a lift, is the same: the
			// configured limit reads the same counts.
			if d := f.state(t, check)[0]; d.Remaining != 0 {
				t.Fatalf("lifted: %d remaining, want 0", d.Remaining)
			}
		})
	}
	// Part of the limit spent: the scale sees those counts against its
	// own count, and the lift sees every unit spent under the scale.
	for _, alg := range []Algorithm{SlidingWindow, FixedWindow, SlidingLog} {
		t.Run("partly spent/"+string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "hole-scale-part")
			id := "part-" + string(alg)
			check := Check{Identity: id, Limit: Limit{Name: "anonymous", Count: 100, Window: time.Hour, Algorithm: alg}}
			for range 4 {
				f.decide(t, check)
			}
			f.set(t, id, scale(0.1), time.Hour)
			if n := admitted(t, f, check); n != 6 {
				t.Fatalf("4 spent of 100, then x0.1: admitted %d, want 6 of 10", n)
			}
			f.lift(t, id)
			if d := f.state(t, check)[0]; d.Remaining != 90 {
				t.Fatalf("lifted: %d remaining, want 90 (10 spent of 100)", d.Remaining)
			}
		})
	}
}

// testCountChangeKeepsCounts: 30/1h spent, then the configuration says
// 10/1h, then 30/1h again: not one more request in that hour (before the
// fix, each count had its own key and started afresh: 10 more, then 0).
// Loosened, the caller has exactly the difference left.
func testCountChangeKeepsCounts(t *testing.T, client redis.UniversalClient) {
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "hole-count")
			id := "anon-" + string(alg)
			limit := func(count int64) Check {
				return Check{Identity: id, Limit: Limit{Name: "anonymous", Count: count, Window: time.Hour, Algorithm: alg}}
			}
			total := admitted(t, f, limit(30))
			if total != burstOf(alg, 30) {
				t.Fatalf("30/1h admitted %d at one instant, want %d", total, burstOf(alg, 30))
			}
			for _, count := range []int64{10, 30, 10, 30} {
				n := admitted(t, f, limit(count))
				total += n
				if n != 0 {
					t.Fatalf("changed to %d/1h after the whole of 30/1h was spent: admitted %d more, want 0", count, n)
				}
			}
			if alg == LeakyBucket {
				return
			}
			f2 := newControlFixture(t, client, "hole-count-up")
			for range 5 {
				f2.decide(t, limit(10))
			}
			if d := f2.state(t, limit(30))[0]; d.Remaining != 25 {
				t.Fatalf("5 spent at 10/1h, loosened to 30/1h: %d remaining, want 25", d.Remaining)
			}
			if d := f2.state(t, limit(4))[0]; d.Allowed || d.Remaining != 0 {
				t.Fatalf("5 spent at 10/1h, tightened to 4/1h: %+v, want denied with 0 remaining", d)
			}
		})
	}
}
