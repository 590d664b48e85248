package ratelimit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// generousBudget replaces the 100 ms budget in tests whose subject is not
// time (NOSCRIPT, MOVED and ASK): on a loaded machine EVALSHA, NOSCRIPT and
// EVAL in a row, or a redirection, can outlast 100 ms, which would be a
// correct timeout, not the failure under test. With it, those tests can run
// fail-closed and count every error.
const generousBudget = 2 * time.Second

// flushLoop runs SCRIPT FLUSH on every node, pausing every between rounds,
// until stop is called, and reports how many flushes succeeded.
func flushLoop(nodes []string, every time.Duration) (stop func() int64) {
	var done atomic.Bool
	var flushes atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		clients := make([]*redis.Client, len(nodes))
		for i, a := range nodes {
			clients[i] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
			defer clients[i].Close()
		}
		for !done.Load() {
			for _, c := range clients {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				if c.ScriptFlush(ctx).Err() == nil {
					flushes.Add(1)
				}
				cancel()
			}
			time.Sleep(every)
		}
	}()
	return func() int64 { done.Store(true); wg.Wait(); return flushes.Load() }
}

// failClosedLoad runs fail-closed decisions, whose errors reach the caller
// (nothing falls back), from a few workers until stop is called.
func failClosedLoad(gate *ratelimit.Gate, workers int) (stop func() (ok int64, errs []error)) {
	var done atomic.Bool
	var okCount atomic.Int64
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !done.Load(); i++ {
				check := ratelimit.Check{
					Identity: fmt.Sprintf("login/%d/%d", w, i%200),
					Limit:    ratelimit.Limit{Name: "login", Count: ratelimit.MaxCount, Window: 15 * time.Minute},
				}
				_, err := gate.Decide(context.Background(), 1, ratelimit.FailClosed, check)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				} else {
					okCount.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	return func() (int64, []error) { done.Store(true); wg.Wait(); return okCount.Load(), errs }
}

// countNoScript counts the errors that carry NOSCRIPT.
func countNoScript(errs []error) int {
	n := 0
	for _, err := range errs {
		if strings.Contains(err.Error(), "NOSCRIPT") {
			n++
		}
	}
	return n
}

// exactLoad makes workers*perWorker limiter decisions over 40 identities,
// all under lim, and reports how many were admitted and how many failed
// (with the first error).
func exactLoad(limiter *ratelimit.Limiter, lim ratelimit.Limit, workers, perWorker int) (admitted, failures int64, firstErr error) {
	var admittedN, failuresN atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				// Many identities, so every node's cache is exercised.
				id := fmt.Sprintf("user-%d", (w*perWorker+i)%40)
				res, err := limiter.Decide(ctx, 1, ratelimit.Check{Identity: id, Limit: lim})
				cancel()
				if err != nil {
					failuresN.Add(1)
					first.CompareAndSwap(nil, err)
					continue
				}
				if res.Allowed {
					admittedN.Add(1)
				}
			}
		})
	}
	wg.Wait()
	firstErr, _ = first.Load().(error)
	return admittedN.Load(), failuresN.Load(), firstErr
}

// TestScriptCacheLossReachesNoCaller flushes every node's script cache
// again and again while decisions run, on a single server and on a
// cluster: EVALSHA's NOSCRIPT is repaired underneath and reaches no caller.
//
// Under limiter load ("exact") no decision fails and the admitted count
// stays exact. Under fail-closed gate load, whose errors reach the caller
// (nothing falls back), not one NOSCRIPT reaches a caller: on the cluster no
// decision fails at all; the single server is also restarted empty mid-run,
// its only failures are the restart's refused connections (ErrUnavailable),
// and decisions succeed again after it.
func TestScriptCacheLossReachesNoCaller(t *testing.T) {
	single := redistest.StartServer(t)
	cluster := redistest.StartCluster(t, 3, 1)
	const exact, failClosed = "exact", "fail-closed"
	cases := []struct {
		name       string
		load       string
		cluster    bool
		restart    bool          // restart the server empty mid-run
		flushEvery time.Duration // the pause between rounds of SCRIPT FLUSH
	}{
		{name: "exact/single", load: exact, flushEvery: 2 * time.Millisecond},
		{name: "exact/cluster", load: exact, cluster: true, flushEvery: 2 * time.Millisecond},
		{name: "fail-closed/cluster", load: failClosed, cluster: true, flushEvery: 3 * time.Millisecond},
		// Last: the restart empties the server the rows above used.
		{name: "fail-closed/single restarted", load: failClosed, restart: true, flushEvery: 3 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes, url := []string{single.Addr()}, single.URL()
			if tc.cluster {
				nodes, url = cluster.Addrs(), clusterURL(cluster.Addrs())
			}
			switch tc.load {
			case exact:
				var client redis.UniversalClient = single.Client(t)
				if tc.cluster {
					client = cluster.Client(t)
				}
				lim := ratelimit.Limit{Name: "user", Count: 300, Window: time.Hour}
				limiter := newLimiter(t, client, ratelimit.Options{KeyPrefix: "flush"})
				const workers, perWorker = 8, 250
				stopFlush := flushLoop(nodes, tc.flushEvery)
				admitted, failures, firstErr := exactLoad(limiter, lim, workers, perWorker)
				flushes := stopFlush()
				if failures > 0 {
					t.Fatalf("%d of %d decisions failed during SCRIPT FLUSH; first: %v", failures, workers*perWorker, firstErr)
				}
				if flushes < 10 {
					t.Fatalf("only %d flushes happened; the test did not exercise NOSCRIPT", flushes)
				}
				// 40 identities x 50 requests each, all under a limit of 300.
				if admitted != workers*perWorker {
					t.Fatalf("admitted %d of %d", admitted, workers*perWorker)
				}
				t.Logf("%d decisions, %d script flushes, no errors", workers*perWorker, flushes)

			case failClosed:
				client := clientWithBudget(t, url, tc.cluster, generousBudget)
				opts := ratelimit.GateOptions{}
				if tc.restart {
					opts.BreakerCooldown = 200 * time.Millisecond
				}
				gate := productionGateWithin(t, client, "noscript", generousBudget, opts)
				stopFlush := flushLoop(nodes, tc.flushEvery)
				stopLoad := failClosedLoad(gate, 3)
				if tc.restart {
					time.Sleep(500 * time.Millisecond)
					single.Restart(t)
				}
				time.Sleep(1500 * time.Millisecond)
				ok, errs := stopLoad()
				flushes := stopFlush()
				t.Logf("%d decisions made, %d rejected, %d script flushes", ok, len(errs), flushes)
				if n := countNoScript(errs); n > 0 {
					t.Errorf("%d NOSCRIPT errors reached callers", n)
				}
				for _, err := range errs {
					switch {
					case !tc.restart:
						t.Errorf("decision error while scripts were flushed: %v", err)
					case !isUnavailable(err):
						t.Errorf("unexpected error kind: %v", err)
					}
				}
				if flushes == 0 || ok == 0 {
					t.Fatalf("nothing happened: %d flushes, %d decisions", flushes, ok)
				}
				if tc.restart {
					if res, err := gate.Decide(context.Background(), 1, ratelimit.FailClosed, ratelimit.Check{Identity: "after", Limit: ratelimit.Limit{Name: "login", Count: 5, Window: time.Minute}}); err != nil || !res.Allowed {
						t.Fatalf("fail-closed decision after the restart: allowed=%v err=%v", res.Allowed, err)
					}
				}
			}
		})
	}
}
