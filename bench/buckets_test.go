package main

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// bucketsK is K of sliding_buckets.lua.
const bucketsK = 10

// bucketsScript starts a redis-server of its own and loads the
// sliding-buckets script from the checkout.
func bucketsScript(t *testing.T) (*redis.Client, *redis.Script) {
	t.Helper()
	srv, err := startRedis("redis-server")
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(srv.stop)
	c := redis.NewClient(&redis.Options{Addr: srv.addr})
	t.Cleanup(func() { c.Close() })
	src, err := os.ReadFile(filepath.Join("..", "pkg", "ratelimit", "lua", "sliding_buckets.lua"))
	if err != nil {
		t.Fatalf("read script: %v", err)
	}
	return c, redis.NewScript(string(src))
}

// attempt is one request of the property test.
type attempt struct {
	at   int64 // microseconds
	cost int64
}

// decideAll sends attempts in order for one key and returns, per attempt,
// the script's reply.
func decideAll(t *testing.T, c *redis.Client, sc *redis.Script, key string, lim limitSpec, spend string, at []attempt) [][]int64 {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, len(at))
	for i, a := range at {
		cmds[i] = sc.Eval(ctx, pipe, []string{key}, a.at, spend, a.cost, lim.Count, lim.Window.Microseconds(), lim.Count)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("replay: %v", err)
	}
	out := make([][]int64, len(cmds))
	for i, cmd := range cmds {
		vals, err := cmd.Int64Slice()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		out[i] = vals
	}
	return out
}

// adversarialSchedule mixes the attacks that hurt window approximations:
// bursts, requests hugging bucket edges from both sides, and background
// noise, over several windows.
func adversarialSchedule(r *rand.Rand, base int64, lim limitSpec, n int) []attempt {
	w := lim.Window.Microseconds()
	span := 6 * w
	edge := func(j int64) int64 { return (j*w + bucketsK - 1) / bucketsK } // ceil(j*w/K)
	var out []attempt
	for len(out) < n {
		var at int64
		switch r.IntN(4) {
		case 0: // anywhere
			at = r.Int64N(span)
		case 1: // just before a bucket edge
			at = max(0, edge(r.Int64N(6*bucketsK)+1)-1-r.Int64N(3))
		case 2: // on or just after a bucket edge
			at = edge(r.Int64N(6*bucketsK)) + r.Int64N(3)
		default: // a burst at one instant
			at = r.Int64N(span)
			for k := r.IntN(int(lim.Count) + 1); k > 0; k-- {
				out = append(out, attempt{base + at, 1})
			}
		}
		cost := int64(1)
		if r.IntN(5) == 0 {
			cost = 1 + r.Int64N(lim.Count)
		}
		out = append(out, attempt{base + at, cost})
	}
	slices.SortStableFunc(out, func(a, b attempt) int { return int(a.at - b.at) })
	return out
}

// TestSlidingBucketsBound checks the proved bound on adversarial schedules:
// no rolling window (t-W, t] ever holds more than floor(limit*(K+1)/K)
// admitted units, and no K consecutive aligned buckets more than limit.
//
// The schedules run on a virtual clock (ARGV[1]) while keys expire on
// Redis's real clock, so every window is long enough (seconds) that no key
// can expire while its test runs: a shorter window would let real time
// outrun virtual time and measure expiry instead of the algorithm.
func TestSlidingBucketsBound(t *testing.T) {
	c, sc := bucketsScript(t)
	cases := []struct {
		name string
		lim  limitSpec
		seed uint64
	}{
		{"limit 1 per 10s", limitSpec{1, 10 * time.Second}, 1},
		{"limit 7 per 7s", limitSpec{7, 7 * time.Second}, 2},
		{"limit 10 per 10s", limitSpec{10, 10 * time.Second}, 3},
		{"limit 100 per minute", limitSpec{100, time.Minute}, 4},
		{"limit 1000 per hour", limitSpec{1000, time.Hour}, 5},
		{"limit 33 per 3.33s", limitSpec{33, 3330 * time.Millisecond}, 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(tc.seed, 99))
			w := tc.lim.Window.Microseconds()
			base := alignedBase(tc.lim.Window).UnixMicro()
			sched := adversarialSchedule(r, base, tc.lim, 4000)
			replies := decideAll(t, c, sc, "bound:"+tc.name, tc.lim, "1", sched)

			var times []int64 // one entry per admitted unit
			for i, rep := range replies {
				if rep[0] == 1 {
					for k := int64(0); k < sched[i].cost; k++ {
						times = append(times, sched[i].at-base)
					}
				}
			}
			if len(times) == 0 {
				t.Fatal("nothing admitted: the schedule proves nothing")
			}
			capA := tc.lim.Count * (bucketsK + 1) / bucketsK
			got, lo := 0, 0
			for hi := range times {
				for times[lo] <= times[hi]-w {
					lo++
				}
				got = max(got, hi-lo+1)
			}
			if int64(got) > capA {
				t.Errorf("a rolling window admitted %d units, bound is %d", got, capA)
			}
			perBucket := map[int64]int64{}
			for _, at := range times {
				perBucket[at*bucketsK/w]++
			}
			for b := int64(0); b < 7*bucketsK; b++ {
				var sum int64
				for j := b; j < b+bucketsK; j++ {
					sum += perBucket[j]
				}
				if sum > tc.lim.Count {
					t.Errorf("buckets %d..%d admitted %d units, limit %d", b, b+bucketsK-1, sum, tc.lim.Count)
				}
			}
		})
	}
}

// TestSlidingBucketsBoundIsReached shows the bound is tight, so that the
// test above could fail: a full window packed at the end of one bucket,
// then greedy attempts, reaches exactly floor(limit*1.1) in one rolling
// window; and a burst from idle admits exactly the limit.
func TestSlidingBucketsBoundIsReached(t *testing.T) {
	c, sc := bucketsScript(t)
	lim := limitSpec{100, time.Minute}
	w := lim.Window.Microseconds()
	base := alignedBase(lim.Window).UnixMicro()
	var sched []attempt
	for i := 0; i < 5000; i++ {
		sched = append(sched, attempt{base + w/bucketsK - 1, 1}) // last us of bucket 0
	}
	for at := base + w/bucketsK; at < base+2*w; at += w / 1000 {
		sched = append(sched, attempt{at, 1})
	}
	replies := decideAll(t, c, sc, "tight", lim, "1", sched)
	burst, inWindow := 0, 0
	for i, rep := range replies {
		if rep[0] != 1 {
			continue
		}
		if i < 5000 {
			burst++
		}
		if sched[i].at < base+w/bucketsK-1+w {
			inWindow++
		}
	}
	if burst != 100 {
		t.Errorf("burst from idle admitted %d, want exactly 100", burst)
	}
	if inWindow != 110 {
		t.Errorf("the rolling window after the burst admitted %d, want the bound 110", inWindow)
	}
}

// TestSlidingBucketsReplies pins down retry_after and peek: a denied
// request retried exactly retry_after later is admitted, one microsecond
// earlier it is not, and a peek never writes.
func TestSlidingBucketsReplies(t *testing.T) {
	c, sc := bucketsScript(t)
	lim := limitSpec{10, 10 * time.Second}
	base := alignedBase(lim.Window).UnixMicro()
	cases := []struct {
		name  string
		fill  []attempt
		probe int64 // when the denied request arrives, after base
	}{
		{"full in the current bucket", []attempt{{base + 5, 10}}, 500_000},
		{"full across buckets", []attempt{{base, 4}, {base + 2_500_000, 3}, {base + 6_000_000, 3}}, 7_000_000},
		{"cap A binding after a boundary", []attempt{{base + 999_999, 10}, {base + 10_600_000, 1}}, 10_700_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "replies:" + tc.name
			decideAll(t, c, sc, key, lim, "1", tc.fill)
			peek := decideAll(t, c, sc, key, lim, "0", []attempt{{base + tc.probe, 1}})[0]
			if peek[2] != 0 {
				t.Fatalf("probe admitted, the case needs a denial: %v", peek)
			}
			retry := peek[5]
			if retry <= 0 {
				t.Fatalf("denied with retry_after %d", retry)
			}
			again := decideAll(t, c, sc, key, lim, "0", []attempt{
				{base + tc.probe + retry - 1, 1}, {base + tc.probe + retry, 1},
			})
			if again[0][2] != 0 {
				t.Errorf("admitted 1us before retry_after (%d us)", retry)
			}
			if again[1][2] != 1 {
				t.Errorf("denied at retry_after (%d us)", retry)
			}
			// Peeks wrote nothing: the real request at retry_after is admitted too.
			if got := decideAll(t, c, sc, key, lim, "1", []attempt{{base + tc.probe + retry, 1}})[0]; got[0] != 1 {
				t.Errorf("request at retry_after denied after peeks: %v", got)
			}
		})
	}
}
