package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"
)

// trace is a synthetic request log: per identity, request times in
// microseconds, ascending.
type trace struct {
	Identities int
	Requests   int
	Duration   time.Duration
	Limit      limitSpec
	times      [][]int64
	exact      [][]bool // the exact sliding log's decisions
	ExactAllow int
}

// makeTrace builds the trace: each identity sends Poisson traffic at a
// rate drawn uniformly between 0.3x and 1.1x of its limit, plus Poisson
// bursts (one every two minutes on average) of 20..150 requests spread
// over two seconds. total scales the duration so that the trace holds
// about that many requests.
func makeTrace(identities, total int, lim limitSpec, seed uint64) *trace {
	r := rand.New(rand.NewPCG(seed, 7))
	perWindow := float64(lim.Count)
	// Expected requests per identity per window: 0.7*limit of Poisson
	// traffic plus bursts of 85 every two minutes.
	bursts := 85.0 * float64(lim.Window) / float64(2*time.Minute)
	perIdentityPerWindow := 0.7*perWindow + bursts
	windows := float64(total) / float64(identities) / perIdentityPerWindow
	dur := time.Duration(windows * float64(lim.Window))
	base := alignedBase(lim.Window).Add(100 * lim.Window).UnixMicro()
	t := &trace{Identities: identities, Duration: dur, Limit: lim, times: make([][]int64, identities)}
	durUs := float64(dur.Microseconds())
	for id := 0; id < identities; id++ {
		var ts []int64
		rate := (0.3 + 0.8*r.Float64()) * perWindow / float64(lim.Window.Microseconds()) // per us
		for at := r.ExpFloat64() / rate; at < durUs; at += r.ExpFloat64() / rate {
			ts = append(ts, base+int64(at))
		}
		burstRate := 1 / float64((2 * time.Minute).Microseconds())
		for at := r.ExpFloat64() / burstRate; at < durUs; at += r.ExpFloat64() / burstRate {
			n := 20 + r.IntN(131)
			for i := 0; i < n; i++ {
				ts = append(ts, base+int64(at+r.Float64()*2e6))
			}
		}
		slices.Sort(ts)
		t.times[id] = ts
		t.Requests += len(ts)
	}
	t.exact = make([][]bool, identities)
	for id, ts := range t.times {
		t.exact[id] = exactLog(ts, lim)
		for _, ok := range t.exact[id] {
			if ok {
				t.ExactAllow++
			}
		}
	}
	return t
}

// exactLog decides times against the exact sliding log: a request at t is
// admitted when fewer than Count admitted requests lie in (t-W, t].
func exactLog(times []int64, lim limitSpec) []bool {
	w := lim.Window.Microseconds()
	out := make([]bool, len(times))
	var admitted []int64
	head := 0
	for i, t := range times {
		for head < len(admitted) && admitted[head] <= t-w {
			head++
		}
		if int64(len(admitted)-head) < lim.Count {
			admitted = append(admitted, t)
			out[i] = true
		}
	}
	return out
}

// accuracyResult compares a contender's decisions on the trace with the
// exact log's.
type accuracyResult struct {
	Decisions   int     `json:"decisions"`
	Allowed     int     `json:"allowed"`
	Differ      int     `json:"differ"`
	DifferShare float64 `json:"differ_share"`
	FalseAllow  int     `json:"false_allows"`
	FalseDeny   int     `json:"false_denies"`
	Seconds     float64 `json:"replay_seconds"`
	Note        string  `json:"note,omitempty"`
}

// runAccuracy replays the trace through the contender's real script at
// each request's time: identities are independent, so workers take
// identities in parallel and pipeline each identity's requests in order.
func runAccuracy(ctx context.Context, b *bench, c *contender, t *trace, onProgress func(done int)) (accuracyResult, error) {
	if err := b.stats.FlushAll(ctx).Err(); err != nil {
		return accuracyResult{}, fmt.Errorf("flushall: %w", err)
	}
	start := time.Now()
	var allowed, falseAllow, falseDeny, done atomic.Int64
	err := parallelEach(4, t.Identities, func(id int) error {
		name := fmt.Sprintf("trace-%04d", id)
		ts := t.times[id]
		const batch = 2000
		for lo := 0; lo < len(ts); lo += batch {
			hi := min(len(ts), lo+batch)
			pipe := b.client.Pipeline()
			for _, at := range ts[lo:hi] {
				c.replay(ctx, pipe, name, t.Limit, at)
			}
			cmds, err := pipe.Exec(ctx)
			if err != nil {
				return fmt.Errorf("%s: replay: %w", c.Name, err)
			}
			for i, cmd := range cmds {
				v, _ := cmdValue(cmd)
				ok := isAllowedReply(v)
				want := t.exact[id][lo+i]
				switch {
				case ok && !want:
					falseAllow.Add(1)
				case !ok && want:
					falseDeny.Add(1)
				}
				if ok {
					allowed.Add(1)
				}
			}
		}
		onProgress(int(done.Add(int64(len(ts)))))
		return nil
	})
	if err != nil {
		return accuracyResult{}, err
	}
	fa, fd := int(falseAllow.Load()), int(falseDeny.Load())
	return accuracyResult{
		Decisions:   t.Requests,
		Allowed:     int(allowed.Load()),
		Differ:      fa + fd,
		DifferShare: float64(fa+fd) / math.Max(1, float64(t.Requests)),
		FalseAllow:  fa,
		FalseDeny:   fd,
		Seconds:     time.Since(start).Seconds(),
	}, nil
}

// parallelEach runs f(i) for i in [0, n) on workers goroutines.
func parallelEach(workers, n int, f func(i int) error) error {
	return parallelChunks(workers, n, 1, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	})
}

func cmdValue(c interface{}) (any, error) {
	type valuer interface{ Result() (any, error) }
	if v, ok := c.(valuer); ok {
		return v.Result()
	}
	return nil, fmt.Errorf("unexpected command type %T", c)
}
