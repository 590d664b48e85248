package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// countingRedisLog counts what go-redis's process-wide logger is given.
type countingRedisLog struct{ lines atomic.Int64 }

func (c *countingRedisLog) Printf(context.Context, string, ...any) { c.lines.Add(1) }

// TestShortPath pins down the common case, New, PerMinute and Allow, on a
// real redis-server: the limit admits exactly its count and then denies
// with a wait; with the server stopped it fails open to the local limit
// (a tenth of the count per process, rounded up), marked Degraded, and
// go-redis's logger, which printed a line per failed dial, prints nothing.
func TestShortPath(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()

	// go-redis's logger (stderr by default; here one that counts) hears
	// of every failed dial: the lines New must silence. This is the only
	// test of the package that calls New, which replaces the logger once
	// per process.
	goRedisLog := &countingRedisLog{}
	redis.SetLogger(goRedisLog)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	_ = dead.Ping(ctx).Err()
	linesBeforeNew := goRedisLog.lines.Load()
	if linesBeforeNew == 0 {
		t.Fatal("go-redis logged nothing for a refused dial: the test no longer shows what New silences")
	}

	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	gate, err := ratelimit.New(client)
	if err != nil {
		t.Fatal(err)
	}
	limit := ratelimit.PerMinute(20)
	key := fmt.Sprintf("caller-%s", t.Name())
	for i := range 20 {
		res, err := gate.Allow(ctx, key, limit)
		if err != nil || !res.Allowed || res.Degraded {
			t.Fatalf("request %d: allowed=%v degraded=%v err=%v, want admitted by Redis", i+1, res.Allowed, res.Degraded, err)
		}
	}
	res, err := gate.Allow(ctx, key, limit)
	if err != nil || res.Allowed || res.RetryAfter() <= 0 {
		t.Fatalf("request 21: allowed=%v retryAfter=%v err=%v, want denied with a wait", res.Allowed, res.RetryAfter(), err)
	}

	srv.Stop()
	const decisions = 50
	admitted := 0
	for i := range decisions {
		res, err := gate.Allow(ctx, "another-caller", limit)
		if err != nil {
			t.Fatalf("decision %d with Redis stopped: %v, want a fail-open answer", i+1, err)
		}
		if !res.Degraded {
			t.Fatalf("decision %d with Redis stopped: not Degraded", i+1)
		}
		if res.Allowed {
			admitted++
		}
	}
	// The fallback admits ceil(20/10) = 2 per minute per process.
	if admitted != 2 {
		t.Errorf("Redis stopped: %d of %d admitted, want the local limit of 2", admitted, decisions)
	}
	if n := goRedisLog.lines.Load() - linesBeforeNew; n != 0 {
		t.Errorf("go-redis's logger got %d lines over %d decisions with Redis stopped, want none", n, decisions)
	}
}

// TestShortPathRefusesANilClient: New says what is wrong instead of
// panicking on the first decision.
func TestShortPathRefusesANilClient(t *testing.T) {
	if _, err := ratelimit.New(nil); err == nil {
		t.Fatal("New(nil): no error")
	}
}
