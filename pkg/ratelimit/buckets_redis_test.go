package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// The sliding-buckets algorithm promises two bounds (see the header of
// pkg/ratelimit/lua/sliding_buckets.lua for the proof):
//
//   - no rolling window (t-W, t] ever holds more than floor(Count*(K+1)/K)
//     admitted units, 1.1x the limit for K = 10 (its check A);
//   - no K consecutive aligned buckets of W/K hold more than Count units, so
//     a burst from idle admits exactly Count (its check B).
//
// TestSlidingBuckets drives the real Limiter on an injected clock against
// real redis-servers, checks both bounds on every schedule, and shows that
// both are reached, so that neither check can go missing unnoticed.
//
// The clock is virtual while keys expire on Redis's real clock (PX set from
// the virtual reset time, at least W after a spend). Every window is at
// least a second long and virtual time runs well ahead of real time, so no
// key expires early: an expiry would forget admitted units and make the
// limiter admit more, never less.

// bucketsK is K of sliding_buckets.lua: buckets per window.
const bucketsK = 10

// bucketsAttempt is one request of a schedule.
type bucketsAttempt struct {
	at   time.Time
	cost int64
}

// bucketsCap is the most any rolling window may hold: floor(Count*(K+1)/K).
func bucketsCap(lim ratelimit.Limit) int {
	return int(lim.Count * (bucketsK + 1) / bucketsK)
}

// bucketsBase is an instant aligned to lim's window, so that windows and
// buckets (aligned on the Unix epoch by the script) start on it.
func bucketsBase(lim ratelimit.Limit) time.Time {
	const epoch = int64(1_800_000_000_000_000) // microseconds, 2027-01-15
	w := lim.Window.Microseconds()
	return time.UnixMicro(epoch - epoch%w)
}

// bucketsReplay sends the schedule, in order, for one identity through
// limiter, stepping clock to each attempt's instant. It returns the instant
// of every admitted unit (a request of cost n counts n times) and how many
// requests were denied.
func bucketsReplay(t *testing.T, limiter *ratelimit.Limiter, clock *testkit.Clock, check ratelimit.Check, sched []bucketsAttempt) (admitted []time.Time, denied int) {
	t.Helper()
	ctx := context.Background()
	for i, a := range sched {
		clock.Set(a.at)
		res, err := limiter.Decide(ctx, a.cost, check)
		if err != nil {
			t.Fatalf("attempt %d (cost %d at %s): %v", i, a.cost, a.at.Format(time.RFC3339Nano), err)
		}
		if !res.Allowed {
			denied++
			continue
		}
		for range a.cost {
			admitted = append(admitted, a.at)
		}
	}
	return admitted, denied
}

// maxInAlignedBuckets is the most units admitted in any bucketsK
// consecutive aligned buckets of window/bucketsK.
func maxInAlignedBuckets(times []time.Time, window time.Duration) int {
	bucket := window.Microseconds() / bucketsK // whole: windows are whole milliseconds
	perBucket := map[int64]int{}
	first, last := int64(0), int64(0)
	for i, at := range times {
		b := at.UnixMicro() / bucket
		perBucket[b]++
		if i == 0 || b < first {
			first = b
		}
		last = max(last, b)
	}
	best := 0
	for b := first; b <= last; b++ {
		sum := 0
		for j := b; j < b+bucketsK; j++ {
			sum += perBucket[j]
		}
		best = max(best, sum)
	}
	return best
}

// bucketsSchedule builds one adversarial schedule for lim from base; r
// supplies the randomness of the schedules that have some.
type bucketsSchedule struct {
	name  string
	build func(r *rand.Rand, base time.Time, lim ratelimit.Limit) []bucketsAttempt
}

// greedyAttempts is one attempt of cost 1 every step in [from, to).
func greedyAttempts(from, to time.Time, step time.Duration) []bucketsAttempt {
	var out []bucketsAttempt
	for at := from; at.Before(to); at = at.Add(step) {
		out = append(out, bucketsAttempt{at, 1})
	}
	return out
}

// burstAttempts is n attempts of cost 1 at one instant.
func burstAttempts(at time.Time, n int64) []bucketsAttempt {
	out := make([]bucketsAttempt, n)
	for i := range out {
		out[i] = bucketsAttempt{at, 1}
	}
	return out
}

// bucketsSchedules are the attacks that hurt window approximations.
var bucketsSchedules = []bucketsSchedule{
	{
		// The attack on the sliding-window counter: a full window's worth
		// in the last microsecond of a window, then as many as are let
		// through in the next; twice over.
		name: "pack the end of a window then refill",
		build: func(_ *rand.Rand, base time.Time, lim ratelimit.Limit) []bucketsAttempt {
			w, step := lim.Window, refillStep(lim)
			var out []bucketsAttempt
			for _, end := range []time.Time{base.Add(w), base.Add(3 * w)} {
				out = append(out, burstAttempts(end.Add(-time.Microsecond), lim.Count+1)...)
				out = append(out, greedyAttempts(end, end.Add(w+w/bucketsK), step)...)
			}
			return out
		},
	},
	{
		// The same at the end of a bucket that is not a window edge, where
		// the stored counters are shifted by a part of a window.
		name: "pack the end of a bucket then refill",
		build: func(r *rand.Rand, base time.Time, lim ratelimit.Limit) []bucketsAttempt {
			w, step := lim.Window, refillStep(lim)
			end := base.Add(w * time.Duration(1+r.IntN(bucketsK-1)) / bucketsK)
			out := burstAttempts(end.Add(-time.Microsecond), lim.Count+1)
			return append(out, greedyAttempts(end, end.Add(2*w), step)...)
		},
	},
	{
		// Up to a limit's worth of units on each side of every bucket edge
		// for three windows, in one to four requests of random cost, so
		// that a bucket's units sit at its very end or its very start.
		name: "bursts hugging bucket edges",
		build: func(r *rand.Rand, base time.Time, lim ratelimit.Limit) []bucketsAttempt {
			var out []bucketsAttempt
			for j := int64(1); j <= 3*bucketsK; j++ {
				edge := base.Add(time.Duration(j) * lim.Window / bucketsK)
				for _, at := range []time.Time{edge.Add(-time.Microsecond), edge} {
					for k := 1 + r.IntN(4); k > 0; k-- {
						out = append(out, bucketsAttempt{at, 1 + r.Int64N(max(1, lim.Count/4))})
					}
				}
			}
			return out
		},
	},
	{
		// A random mix over six windows: anywhere, just before or on a
		// bucket edge, bursts, and one request in five of random cost up to
		// the limit.
		name: "random mix",
		build: func(r *rand.Rand, base time.Time, lim ratelimit.Limit) []bucketsAttempt {
			w := lim.Window.Microseconds()
			edge := func(j int64) int64 { return j * w / bucketsK }
			var out []bucketsAttempt
			for len(out) < 600 {
				var at int64
				switch r.IntN(4) {
				case 0:
					at = r.Int64N(6 * w)
				case 1:
					at = max(0, edge(1+r.Int64N(6*bucketsK))-1-r.Int64N(3))
				case 2:
					at = edge(r.Int64N(6*bucketsK)) + r.Int64N(3)
				default:
					at = r.Int64N(6 * w)
					out = append(out, burstAttempts(base.Add(time.Duration(at)*time.Microsecond), r.Int64N(lim.Count+1))...)
				}
				cost := int64(1)
				if r.IntN(5) == 0 {
					cost = 1 + r.Int64N(lim.Count)
				}
				out = append(out, bucketsAttempt{base.Add(time.Duration(at) * time.Microsecond), cost})
			}
			slices.SortStableFunc(out, func(a, b bucketsAttempt) int { return a.at.Compare(b.at) })
			return out
		},
	},
}

// refillStep spaces greedy attempts so that a window holds about four per
// unit of the limit, and at most 400: fine enough to take every unit the
// limiter lets through, few enough to keep the test fast.
func refillStep(lim ratelimit.Limit) time.Duration {
	return (lim.Window / time.Duration(min(4*lim.Count, 400))).Truncate(time.Microsecond)
}

// TestSlidingBuckets runs the specification of the sliding-buckets bounds
// on a single server and on a cluster, which share the servers' start-up.
func TestSlidingBuckets(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			client := topo.NewClient(t)
			t.Run("never more than floor(1.1 x limit) in a rolling window nor the limit in K aligned buckets", func(t *testing.T) {
				testSlidingBucketsBound(t, client)
			})
			t.Run("the bounds are reached", func(t *testing.T) { testSlidingBucketsBoundIsReached(t, client) })
			t.Run("RetryAfter is exact", func(t *testing.T) { testSlidingBucketsRetryAfterIsExact(t, client) })
		})
	}
}

// testSlidingBucketsBound plays adversarial schedules against several
// limits and checks both bounds on everything admitted.
func testSlidingBucketsBound(t *testing.T, client redis.UniversalClient) {
	limits := []ratelimit.Limit{
		{Count: 1, Window: 10 * time.Second},
		{Count: 7, Window: 7 * time.Second},
		{Count: 10, Window: 10 * time.Second},
		{Count: 33, Window: 3330 * time.Millisecond},
		{Count: 100, Window: time.Minute},
		{Count: 1000, Window: time.Hour},
	}
	for li, lim := range limits {
		lim.Name, lim.Algorithm = "bound", ratelimit.SlidingBuckets
		for si, s := range bucketsSchedules {
			t.Run(fmt.Sprintf("%d per %s/%s", lim.Count, lim.Window, s.name), func(t *testing.T) {
				base := bucketsBase(lim)
				clock := testkit.NewClock(base)
				limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "buckets", Now: clock.Now})
				sched := s.build(rand.New(rand.NewPCG(uint64(li), uint64(si))), base, lim)
				check := ratelimit.Check{Identity: t.Name(), Limit: lim}
				admitted, denied := bucketsReplay(t, limiter, clock, check, sched)
				if len(admitted) == 0 || denied == 0 {
					t.Fatalf("%d units admitted, %d requests denied: the schedule never pressed the limit and proves nothing", len(admitted), denied)
				}
				rolling, aligned := testkit.MaxInRollingWindow(admitted, lim.Window), maxInAlignedBuckets(admitted, lim.Window)
				t.Logf("%d requests, %d units admitted; most in a rolling window %d (bound %d), in %d aligned buckets %d (limit %d)",
					len(sched), len(admitted), rolling, bucketsCap(lim), bucketsK, aligned, lim.Count)
				if rolling > bucketsCap(lim) {
					t.Errorf("a rolling window of %s admitted %d units, bound floor(1.1 x %d) = %d", lim.Window, rolling, lim.Count, bucketsCap(lim))
				}
				if aligned > int(lim.Count) {
					t.Errorf("%d aligned consecutive buckets admitted %d units, limit %d", bucketsK, aligned, lim.Count)
				}
			})
		}
	}
}

// testSlidingBucketsBoundIsReached shows that the bounds are tight, so that
// the checks above can fail: a burst from idle, at the last microsecond of a
// bucket, admits exactly the limit, and greedy attempts after it bring the
// rolling window that starts with the burst to exactly floor(1.1 x limit).
func testSlidingBucketsBoundIsReached(t *testing.T, client redis.UniversalClient) {
	for _, lim := range []ratelimit.Limit{
		{Count: 10, Window: 10 * time.Second},
		{Count: 33, Window: 3330 * time.Millisecond},
		{Count: 100, Window: time.Minute},
	} {
		lim.Name, lim.Algorithm = "tight", ratelimit.SlidingBuckets
		t.Run(fmt.Sprintf("%d per %s", lim.Count, lim.Window), func(t *testing.T) {
			base := bucketsBase(lim)
			clock := testkit.NewClock(base)
			limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "buckets", Now: clock.Now})
			check := ratelimit.Check{Identity: t.Name(), Limit: lim}

			packed := base.Add(lim.Window/bucketsK - time.Microsecond) // the last microsecond of bucket 0
			fromIdle, _ := bucketsReplay(t, limiter, clock, check, burstAttempts(packed, 2*lim.Count))
			if len(fromIdle) != int(lim.Count) {
				t.Errorf("a burst of %d from idle admitted %d, want exactly the limit %d", 2*lim.Count, len(fromIdle), lim.Count)
			}
			// Greedy through the rolling window that starts with the burst,
			// one attempt every W/1000.
			refill, _ := bucketsReplay(t, limiter, clock, check,
				greedyAttempts(packed.Add(time.Microsecond), packed.Add(lim.Window), lim.Window/1000))
			if got := testkit.MaxInRollingWindow(append(fromIdle, refill...), lim.Window); got != bucketsCap(lim) {
				t.Errorf("the rolling window after the burst admitted %d, want the bound floor(1.1 x %d) = %d", got, lim.Count, bucketsCap(lim))
			}
		})
	}
}

// testSlidingBucketsRetryAfterIsExact pins RetryAfter down where each check
// binds: a denied request retried exactly RetryAfter later is admitted, one
// microsecond earlier it is not, and the Peeks that found out spent nothing.
func testSlidingBucketsRetryAfterIsExact(t *testing.T, client redis.UniversalClient) {
	lim := ratelimit.Limit{Name: "retry", Count: 10, Window: 10 * time.Second, Algorithm: ratelimit.SlidingBuckets}
	base := bucketsBase(lim)
	at := func(us int64) time.Time { return base.Add(time.Duration(us) * time.Microsecond) }
	cases := []struct {
		name  string
		fill  []bucketsAttempt
		probe time.Time // when the denied request arrives
	}{
		{"full in the current bucket (B binds)", []bucketsAttempt{{at(5), 10}}, at(500_000)},
		{"full across buckets (B binds)", []bucketsAttempt{{at(0), 4}, {at(2_500_000), 3}, {at(6_000_000), 3}}, at(7_000_000)},
		{"full at the end of a bucket, probed after a window edge (A binds)", []bucketsAttempt{{at(999_999), 10}, {at(10_600_000), 1}}, at(10_700_000)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := testkit.NewClock(base)
			limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "buckets", Now: clock.Now})
			check := ratelimit.Check{Identity: t.Name(), Limit: lim}
			if _, denied := bucketsReplay(t, limiter, clock, check, tc.fill); denied != 0 {
				t.Fatalf("%d of the filling requests denied", denied)
			}
			peekAt := func(when time.Time) ratelimit.Result {
				clock.Set(when)
				res, err := ratelimit.LimiterPeek(limiter, ctx, 1, check)
				if err != nil {
					t.Fatalf("peek: %v", err)
				}
				return res
			}
			res := peekAt(tc.probe)
			if res.Allowed {
				t.Fatal("the probe was admitted; the case needs a denial")
			}
			retry := res.RetryAfter()
			if retry <= 0 {
				t.Fatalf("denied with RetryAfter %s", retry)
			}
			if peekAt(tc.probe.Add(retry - time.Microsecond)).Allowed {
				t.Errorf("admitted 1us before RetryAfter (%s)", retry)
			}
			if !peekAt(tc.probe.Add(retry)).Allowed {
				t.Errorf("still denied at RetryAfter (%s)", retry)
			}
			if _, denied := bucketsReplay(t, limiter, clock, check, []bucketsAttempt{{tc.probe.Add(retry), 1}}); denied != 0 {
				t.Errorf("the request at RetryAfter was denied after the peeks: a peek spent")
			}
		})
	}
}
