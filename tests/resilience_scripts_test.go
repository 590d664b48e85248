package tests

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

// flushLoop runs SCRIPT FLUSH on every node every few milliseconds until
// stop is called, and reports how many flushes succeeded.
func flushLoop(nodes []string) (stop func() int64) {
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
			time.Sleep(3 * time.Millisecond)
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
				_, err := gate.Decide(context.Background(), 1, true, check)
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

// TestScriptCacheLossReachesNoCaller flushes every node's script cache
// again and again under fail-closed load, on a single server that is also
// restarted empty mid-run and on a cluster: not one NOSCRIPT reaches a
// caller. On the cluster no decision fails at all; on the single server
// the only failures are the restart's refused connections (ErrUnavailable),
// and decisions succeed again after it.
func TestScriptCacheLossReachesNoCaller(t *testing.T) {
	t.Run("single server restarted", func(t *testing.T) {
		server := redistest.StartServer(t)
		client := clientWithBudget(t, server.URL(), false, generousBudget)
		gate := productionGate(t, client, "noscript", ratelimit.GateOptions{Timeout: generousBudget, Breaker: ratelimit.BreakerOptions{Cooldown: 200 * time.Millisecond}})
		stopFlush := flushLoop([]string{server.Addr()})
		stopLoad := failClosedLoad(gate, 3)
		time.Sleep(500 * time.Millisecond)
		server.Restart(t)
		time.Sleep(1500 * time.Millisecond)
		ok, errs := stopLoad()
		flushes := stopFlush()
		t.Logf("%d decisions made, %d rejected (restart), %d script flushes; gate %+v", ok, len(errs), flushes, gate.Stats())
		if n := countNoScript(errs); n > 0 {
			t.Errorf("%d NOSCRIPT errors reached callers", n)
		}
		for _, err := range errs {
			if !isUnavailable(err) {
				t.Errorf("unexpected error kind: %v", err)
			}
		}
		if res, err := gate.Decide(context.Background(), 1, true, ratelimit.Check{Identity: "after", Limit: ratelimit.Limit{Name: "login", Count: 5, Window: time.Minute}}); err != nil || !res.Allowed {
			t.Fatalf("fail-closed decision after the restart: allowed=%v err=%v", res.Allowed, err)
		}
	})

	t.Run("cluster", func(t *testing.T) {
		cluster := redistest.StartCluster(t, 3, 1)
		client := clientWithBudget(t, clusterURL(cluster.Addrs()), true, generousBudget)
		gate := productionGate(t, client, "noscript", ratelimit.GateOptions{Timeout: generousBudget})
		stopFlush := flushLoop(cluster.Addrs())
		stopLoad := failClosedLoad(gate, 3)
		time.Sleep(1500 * time.Millisecond)
		ok, errs := stopLoad()
		flushes := stopFlush()
		t.Logf("%d decisions made, %d script flushes; gate %+v", ok, flushes, gate.Stats())
		for _, err := range errs {
			t.Errorf("decision error while scripts were flushed: %v", err)
		}
		if flushes == 0 || ok == 0 {
			t.Fatalf("nothing happened: %d flushes, %d decisions", flushes, ok)
		}
	})
}
