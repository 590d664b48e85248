package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// slotTopology is a real Redis deployment the concurrency tests run on:
// newClient builds a client for the code under test, as NewClient does in
// production.
type slotTopology struct {
	name      string
	newClient func(t *testing.T) redis.UniversalClient
	admin     redis.UniversalClient // the harness's client, for SCRIPT FLUSH and inspection
}

func startSlotTopologies(t *testing.T) []slotTopology {
	t.Helper()
	single := redistest.StartServer(t)
	cluster := redistest.StartCluster(t, 3, 0)
	clientOf := func(cfg redisclient.Config) func(t *testing.T) redis.UniversalClient {
		return func(t *testing.T) redis.UniversalClient {
			c, err := redisclient.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
	}
	return []slotTopology{
		{"single node", clientOf(redisclient.Config{URL: single.URL(), Timeout: 2 * time.Second}), single.Client(t)},
		{"cluster", clientOf(redisclient.Config{URL: "redis://" + cluster.Addrs()[0], Cluster: true, Timeout: 2 * time.Second}), cluster.Client(t)},
	}
}

// flushScripts empties the script cache of every node.
func flushScripts(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() })
	} else {
		err = c.ScriptFlush(ctx).Err()
	}
	if err != nil {
		t.Fatalf("SCRIPT FLUSH: %v", err)
	}
}

func mustLimiter(t *testing.T, c redis.UniversalClient, opts Options) *Limiter {
	t.Helper()
	l, err := NewLimiter(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAcquireHoldsExactlyMaxUnderConcurrency(t *testing.T) {
	const (
		instances = 8
		attempts  = 400
		maxSlots  = 7
	)
	for _, topo := range startSlotTopologies(t) {
		t.Run(topo.name, func(t *testing.T) {
			ctx := context.Background()
			limiters := make([]*Limiter, instances)
			for i := range limiters {
				limiters[i] = mustLimiter(t, topo.newClient(t), Options{KeyPrefix: "cc-exact"})
			}
			limit := ConcurrencyLimit{Name: "org", Max: maxSlots, Lease: time.Hour}
			var (
				mu    sync.Mutex
				held  []Slot
				wg    sync.WaitGroup
				fails []error
			)
			start := make(chan struct{})
			for i := range attempts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					slot, err := limiters[i%instances].acquireSlot(ctx, "org:acme", limit)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						fails = append(fails, err)
					case slot.Acquired:
						held = append(held, slot)
					case slot.RetryAfter != time.Second || slot.Held != maxSlots:
						fails = append(fails, fmt.Errorf("denial with RetryAfter %v and Held %d, want 1s and %d", slot.RetryAfter, slot.Held, maxSlots))
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(fails) > 0 {
				t.Fatalf("%d acquires failed, first: %v", len(fails), fails[0])
			}
			if len(held) != maxSlots {
				t.Fatalf("%d of %d simultaneous acquires held a slot, want exactly %d", len(held), attempts, maxSlots)
			}
			// Another identity has slots of its own.
			if s, err := limiters[0].acquireSlot(ctx, "org:other", limit); err != nil || !s.Acquired || s.Held != 1 {
				t.Fatalf("another identity: %+v, %v; want its first slot", s, err)
			}
			// Releasing every slot frees exactly as many.
			for _, s := range held {
				if ok, err := limiters[1].releaseSlot(ctx, s); err != nil || !ok {
					t.Fatalf("release: %v, %v; want released", ok, err)
				}
			}
			if ok, err := limiters[1].releaseSlot(ctx, held[0]); err != nil || ok {
				t.Fatalf("second release of one slot: %v, %v; want a no-op", ok, err)
			}
			peek, err := limiters[0].peekSlots(ctx, "org:acme", limit)
			if err != nil || peek.Held != 0 || !peek.Acquired {
				t.Fatalf("after every release: %+v, %v; want none held", peek, err)
			}
			key := limiters[0].concurrencyKey("org:acme", limit)
			if n, err := topo.admin.Exists(ctx, key).Result(); err != nil || n != 0 {
				t.Fatalf("slot set still exists after every release (%d, %v)", n, err)
			}
		})
	}
}

func TestLeaseEndFreesTheSlotAndNotBefore(t *testing.T) {
	server := redistest.StartServer(t)
	ctx := context.Background()
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := liveLimiter(t, server, "cc-lease", &clock)
	limit := ConcurrencyLimit{Name: "anonymous", Max: 2, Lease: 30 * time.Second}

	first, err := l.acquireSlot(ctx, "ip:203.0.113.5", limit)
	if err != nil || !first.Acquired || !first.LeaseEnd.Equal(clock.Add(30*time.Second)) {
		t.Fatalf("first acquire: %+v, %v; want a slot until now+30s", first, err)
	}
	clock = clock.Add(10 * time.Second)
	if s, err := l.acquireSlot(ctx, "ip:203.0.113.5", limit); err != nil || !s.Acquired || s.Held != 2 {
		t.Fatalf("second acquire: %+v, %v", s, err)
	}
	denied, err := l.acquireSlot(ctx, "ip:203.0.113.5", limit)
	if err != nil || denied.Acquired {
		t.Fatalf("third acquire: %+v, %v; want a denial", denied, err)
	}
	if !denied.EarliestEnd.Equal(first.LeaseEnd) || !denied.LatestEnd.Equal(clock.Add(30*time.Second)) || denied.Held != 2 {
		t.Fatalf("denial: %+v; want the lease ends of both slots", denied)
	}
	if denied.RetryAfter != time.Second {
		t.Fatalf("denial 20s before the earliest lease end: RetryAfter %v, want the 1s hint", denied.RetryAfter)
	}

	// 1µs before the first lease ends the slot is still held; the hint is
	// then the time left, as it is shorter than the 1s.
	clock = first.LeaseEnd.Add(-time.Microsecond)
	s, err := l.acquireSlot(ctx, "ip:203.0.113.5", limit)
	if err != nil || s.Acquired || s.RetryAfter != time.Microsecond {
		t.Fatalf("1µs before the lease end: %+v, %v; want a denial with RetryAfter 1µs", s, err)
	}
	if p, err := l.peekSlots(ctx, "ip:203.0.113.5", limit); err != nil || p.Held != 2 || p.Acquired || !p.EarliestEnd.Equal(first.LeaseEnd) {
		t.Fatalf("peek 1µs before the lease end: %+v, %v; want both slots held", p, err)
	}
	clock = first.LeaseEnd
	if p, err := l.peekSlots(ctx, "ip:203.0.113.5", limit); err != nil || p.Held != 1 || !p.Acquired || !p.EarliestEnd.Equal(denied.LatestEnd) {
		t.Fatalf("peek at the lease end: %+v, %v; want one slot held, ending at %v", p, err, denied.LatestEnd)
	}
	s, err = l.acquireSlot(ctx, "ip:203.0.113.5", limit)
	if err != nil || !s.Acquired || s.Held != 2 {
		t.Fatalf("at the lease end: %+v, %v; want the crashed holder's slot", s, err)
	}
	// The holder whose lease ended releases late: nothing of the new
	// holder's is freed.
	if ok, err := l.releaseSlot(ctx, first); err != nil || ok {
		t.Fatalf("release after the lease end: %v, %v; want a no-op", ok, err)
	}
	if p, err := l.peekSlots(ctx, "ip:203.0.113.5", limit); err != nil || p.Held != 2 || p.Acquired {
		t.Fatalf("after the late release: %+v, %v; want both slots still held", p, err)
	}
	// The key lives as long as the longest lease, not longer.
	ttl, err := server.Client(t).PTTL(ctx, l.concurrencyKey("ip:203.0.113.5", limit)).Result()
	if err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("slot set's TTL %v (%v), want at most the 30s lease", ttl, err)
	}
}

// TestLeaseEndOnTheRedisClock runs on Redis's own clock: a slot with a
// short lease that is never released frees itself, and only at its end as
// Redis measures it.
func TestLeaseEndOnTheRedisClock(t *testing.T) {
	server := redistest.StartServer(t)
	ctx := context.Background()
	client, err := redisclient.New(redisclient.Config{URL: server.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	l := mustLimiter(t, client, Options{KeyPrefix: "cc-clock"})
	limit := ConcurrencyLimit{Name: "user", Max: 1, Lease: 150 * time.Millisecond}
	held, err := l.acquireSlot(ctx, "user:7", limit)
	if err != nil || !held.Acquired {
		t.Fatalf("acquire: %+v, %v", held, err)
	}
	for {
		s, err := l.acquireSlot(ctx, "user:7", limit)
		if err != nil {
			t.Fatal(err)
		}
		if s.Acquired {
			if s.At.Before(held.LeaseEnd) {
				t.Fatalf("slot taken at %v, before the lease end %v", s.At, held.LeaseEnd)
			}
			break
		}
		if !s.EarliestEnd.Equal(held.LeaseEnd) || s.RetryAfter > held.LeaseEnd.Sub(s.At) || s.RetryAfter <= 0 {
			t.Fatalf("denial %+v; want the lease end %v and a wait until it", s, held.LeaseEnd)
		}
		time.Sleep(min(s.RetryAfter, 20*time.Millisecond))
	}
}

func TestReleaseAfterScriptFlushRestartAndFailover(t *testing.T) {
	ctx := context.Background()
	limit := ConcurrencyLimit{Name: "org", Max: 2, Lease: time.Hour}

	t.Run("script flush reaches no caller", func(t *testing.T) {
		for _, topo := range startSlotTopologies(t) {
			t.Run(topo.name, func(t *testing.T) {
				l := mustLimiter(t, topo.newClient(t), Options{KeyPrefix: "cc-flush"})
				if err := l.LoadScripts(ctx); err != nil {
					t.Fatal(err)
				}
				a, err := l.acquireSlot(ctx, "org:acme", limit)
				if err != nil || !a.Acquired {
					t.Fatalf("acquire: %+v, %v", a, err)
				}
				flushScripts(t, topo.admin)
				if ok, err := l.releaseSlot(ctx, a); err != nil || !ok {
					t.Fatalf("release after SCRIPT FLUSH: %v, %v; want released", ok, err)
				}
				flushScripts(t, topo.admin)
				for range 2 {
					if s, err := l.acquireSlot(ctx, "org:acme", limit); err != nil || !s.Acquired {
						t.Fatalf("acquire after SCRIPT FLUSH: %+v, %v", s, err)
					}
				}
				if s, err := l.acquireSlot(ctx, "org:acme", limit); err != nil || s.Acquired {
					t.Fatalf("third acquire: %+v, %v; want a denial", s, err)
				}
			})
		}
	})

	t.Run("restart", func(t *testing.T) {
		server := redistest.StartServer(t)
		client, err := redisclient.New(redisclient.Config{URL: server.URL(), Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		l := mustLimiter(t, client, Options{KeyPrefix: "cc-restart"})
		var before []Slot
		for range 2 {
			s, err := l.acquireSlot(ctx, "org:acme", limit)
			if err != nil || !s.Acquired {
				t.Fatalf("acquire: %+v, %v", s, err)
			}
			before = append(before, s)
		}
		server.Restart(t) // empty: the slots are forgotten
		var after []Slot
		for range 2 {
			s, err := l.acquireSlot(ctx, "org:acme", limit)
			if err != nil || !s.Acquired {
				t.Fatalf("acquire after the restart: %+v, %v", s, err)
			}
			after = append(after, s)
		}
		// The holders from before the restart release: no-ops, which free
		// none of the new holders' slots.
		for _, s := range before {
			if ok, err := l.releaseSlot(ctx, s); err != nil || ok {
				t.Fatalf("release of a forgotten slot: %v, %v; want a no-op", ok, err)
			}
		}
		if p, err := l.peekSlots(ctx, "org:acme", limit); err != nil || p.Held != 2 || p.Acquired {
			t.Fatalf("after the old holders released: %+v, %v; want the 2 new slots held", p, err)
		}
		for _, s := range after {
			if ok, err := l.releaseSlot(ctx, s); err != nil || !ok {
				t.Fatalf("release: %v, %v", ok, err)
			}
		}
		if p, err := l.peekSlots(ctx, "org:acme", limit); err != nil || p.Held != 0 {
			t.Fatalf("after every release: %+v, %v; want none held (no slot leaked)", p, err)
		}
	})

	t.Run("failover", func(t *testing.T) {
		cluster := redistest.StartCluster(t, 3, 1)
		client, err := redisclient.New(redisclient.Config{URL: "redis://" + cluster.Addrs()[0], Cluster: true, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		l := mustLimiter(t, client, Options{KeyPrefix: "cc-failover"})
		held, err := l.acquireSlot(ctx, "org:acme", limit)
		if err != nil || !held.Acquired {
			t.Fatalf("acquire: %+v, %v", held, err)
		}
		admin := cluster.Client(t)
		// The replica has the slot before the failover (WAIT), as it has
		// after a coordinated one.
		master, err := admin.MasterForKey(ctx, held.key)
		if err != nil {
			t.Fatal(err)
		}
		if err := master.Do(ctx, "WAIT", 1, 2000).Err(); err != nil {
			t.Fatal(err)
		}
		cluster.Failover(t, master.Options().Addr)
		// The slot survived: it still counts, and its release frees it.
		var other Slot
		for {
			other, err = l.acquireSlot(ctx, "org:acme", limit)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrUnavailable) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the client learns the new master
		}
		if !other.Acquired || other.Held != 2 {
			t.Fatalf("acquire after the failover: %+v; want the second of 2 slots", other)
		}
		if ok, err := l.releaseSlot(ctx, held); err != nil || !ok {
			t.Fatalf("release after the failover: %v, %v; want released", ok, err)
		}
		if p, err := l.peekSlots(ctx, "org:acme", limit); err != nil || p.Held != 1 {
			t.Fatalf("after the release: %+v, %v; want the other holder's slot only", p, err)
		}
	})
}

func TestConcurrencyLimitValidation(t *testing.T) {
	server := redistest.StartServer(t)
	l := mustLimiter(t, server.Client(t), Options{KeyPrefix: "cc-invalid"})
	for _, c := range []struct {
		name  string
		limit ConcurrencyLimit
	}{
		{"max 0", ConcurrencyLimit{Name: "a", Max: 0, Lease: time.Second}},
		{"max negative", ConcurrencyLimit{Name: "a", Max: -3, Lease: time.Second}},
		{"max too large", ConcurrencyLimit{Name: "a", Max: maxConcurrency + 1, Lease: time.Second}},
		{"no lease", ConcurrencyLimit{Name: "a", Max: 1}},
		{"lease below 1ms", ConcurrencyLimit{Name: "a", Max: 1, Lease: 999 * time.Microsecond}},
		{"lease not whole ms", ConcurrencyLimit{Name: "a", Max: 1, Lease: 1500 * time.Microsecond}},
		{"lease over a day", ConcurrencyLimit{Name: "a", Max: 1, Lease: 24*time.Hour + time.Millisecond}},
		{"negative retry", ConcurrencyLimit{Name: "a", Max: 1, Lease: time.Second, Retry: -time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.limit.validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
			if _, err := l.acquireSlot(context.Background(), "x", c.limit); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Acquire: %v, want ErrInvalid", err)
			}
			gate := NewGate(l, GateOptions{})
			if _, err := gate.Acquire(context.Background(), FailOpen, "x", c.limit); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Gate.Acquire: %v, want ErrInvalid even when failing open", err)
			}
		})
	}
	if ok, err := l.releaseSlot(context.Background(), Slot{}); ok || err != nil {
		t.Fatalf("release of a slot never acquired: %v, %v; want a no-op", ok, err)
	}
}

func TestGateAcquireFailsOpenToTheDividedLocalCount(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	gate := newGate(refusedLimiter(t), GateOptions{FallbackInstances: 10, BreakerDisabled: true}, func() time.Time { return now })
	ctx := context.Background()
	limit := ConcurrencyLimit{Name: "org", Max: 15, Lease: time.Minute, Retry: 2 * time.Second}
	var held []Slot
	for range 3 {
		s, err := gate.Acquire(ctx, FailOpen, "org:acme", limit)
		if err != nil {
			t.Fatalf("fail-open acquire: %v", err)
		}
		if !s.Degraded || !errors.Is(s.Cause, ErrUnavailable) || s.RedisLatency <= 0 {
			t.Fatalf("fallback slot %+v: want Degraded, the cause and the failed attempt's time", s)
		}
		if s.Acquired {
			held = append(held, s)
		} else if s.RetryAfter != 2*time.Second {
			t.Fatalf("local denial RetryAfter %v, want the limit's 2s", s.RetryAfter)
		}
	}
	if len(held) != 2 {
		t.Fatalf("local count held %d slots, want 15/10 rounded up = 2", len(held))
	}
	if s, _ := gate.Acquire(ctx, FailOpen, "org:other", limit); !s.Acquired {
		t.Fatal("another identity was denied by the local count")
	}
	if ok, err := gate.Release(ctx, held[0]); err != nil || !ok {
		t.Fatalf("local release: %v, %v", ok, err)
	}
	if ok, _ := gate.Release(ctx, held[0]); ok {
		t.Fatal("a local slot was released twice")
	}
	if s, _ := gate.Acquire(ctx, FailOpen, "org:acme", limit); !s.Acquired {
		t.Fatal("the released local slot was not free again")
	}
	// A local slot that is never released frees itself at its lease end.
	now = held[1].LeaseEnd
	if s, _ := gate.Acquire(ctx, FailOpen, "org:acme", limit); !s.Acquired {
		t.Fatal("a local slot outlived its lease")
	}
	if ok, _ := gate.Release(ctx, held[1]); ok {
		t.Fatal("a local slot whose lease ended was released as held")
	}

	s, err := gate.Acquire(ctx, FailClosed, "org:acme", limit)
	if !errors.Is(err, ErrUnavailable) || s.Acquired || s.RedisLatency <= 0 {
		t.Fatalf("fail-closed acquire: %+v, %v; want ErrUnavailable with the attempt's time", s, err)
	}
}

func TestGateConcurrencyOnRedis(t *testing.T) {
	server := redistest.StartServer(t)
	ctx := context.Background()
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	gate := NewGate(liveLimiter(t, server, "cc-gate", &clock), GateOptions{})
	limit := ConcurrencyLimit{Name: "org", Max: 1, Lease: time.Minute}
	held, err := gate.Acquire(ctx, FailClosed, "org:acme", limit)
	if err != nil || !held.Acquired || held.Degraded || held.RedisLatency <= 0 {
		t.Fatalf("acquire: %+v, %v", held, err)
	}
	// Denials are asked of Redis every time: a release frees a slot at
	// once, whatever the last denial said.
	for range 2 {
		if s, err := gate.Acquire(ctx, FailClosed, "org:acme", limit); err != nil || s.Acquired {
			t.Fatalf("second acquire: %+v, %v; want a denial", s, err)
		}
	}
	if ok, err := gate.Release(ctx, held); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if s, err := gate.Acquire(ctx, FailClosed, "org:acme", limit); err != nil || !s.Acquired {
		t.Fatalf("acquire after the release: %+v, %v; want the freed slot", s, err)
	}
	if p, err := gate.PeekSlots(ctx, "org:acme", limit); err != nil || p.Held != 1 || p.Acquired || p.Degraded {
		t.Fatalf("peek: %+v, %v", p, err)
	}
	if got := gate.stats().denyCacheHits; got != 0 {
		t.Fatalf("deny cache answered %d acquires, want none", got)
	}
}

func TestSlotFallbackStaysBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f := newSlotFallback(1, 16, func() time.Time { return now })
	limit := ConcurrencyLimit{Name: "a", Max: 5, Lease: time.Minute}
	for i := range 100 {
		f.acquire(fmt.Sprint("id-", i), limit, true)
	}
	if len(f.slots) != 16 {
		t.Fatalf("fallback holds %d identities, want the bound of 16 (later ones denied, not admitted uncounted)", len(f.slots))
	}
	if s := f.acquire("id-99", limit, true); s.Acquired {
		t.Fatal("an identity past the bound was admitted uncounted")
	}
	now = now.Add(time.Minute) // every lease ended: room again
	if s := f.acquire("id-99", limit, true); !s.Acquired {
		t.Fatal("no room after every lease ended")
	}
}
