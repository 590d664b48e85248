package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestSimultaneousRequestsAdmitExactlyTheLimit fires 5,000 requests at once
// at one identity from 10 independent clients (separate pools, like
// separate Lambda instances). Every algorithm admits exactly its burst: 100
// for all but the leaky bucket, whose burst is 1.
func TestSimultaneousRequestsAdmitExactlyTheLimit(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	const (
		clients  = 10
		requests = 5000
		limit    = 100
	)
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			limiters := make([]*ratelimit.Limiter, clients)
			for i := range limiters {
				c := topo.NewClient(t)
				limiters[i] = newLimiter(t, c, ratelimit.Options{KeyPrefix: "burst"})
				redistest.WarmPool(t, c, 50)
			}
			for _, alg := range ratelimit.Algorithms() {
				t.Run(string(alg), func(t *testing.T) {
					// An hour-long window: nothing refills during the test
					// (the leaky bucket frees one slot every 36 s).
					lim := ratelimit.Limit{Name: "anonymous", Count: limit, Window: time.Hour, Algorithm: alg}
					identity := fmt.Sprintf("203.0.113.7/%s/%s", topo.Name, alg)
					var admitted, denied atomic.Int64
					var errs sync.Map
					start := make(chan struct{})
					var wg sync.WaitGroup
					for i := range requests {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
							defer cancel()
							d, err := allowOne(limiters[i%clients], ctx, identity, lim)
							switch {
							case err != nil:
								errs.Store(err.Error(), true)
							case d.Allowed:
								admitted.Add(1)
							default:
								denied.Add(1)
							}
						}()
					}
					close(start)
					wg.Wait()
					errs.Range(func(k, _ any) bool { t.Errorf("decision error: %v", k); return true })
					want := expectedBurst(alg, limit)
					if admitted.Load() != want || denied.Load() != requests-want {
						t.Fatalf("admitted %d, denied %d of %d; want exactly %d admitted", admitted.Load(), denied.Load(), requests, want)
					}
				})
			}
		})
	}
}

// TestTenThousandIdentitiesSpreadAndExpire checks the key layout on a real
// cluster: keys of 10,000 identities land on every master, a tier limit
// and a route limit of one identity are decided in one call (no
// CROSSSLOT), and every key expires within two windows.
func TestTenThousandIdentitiesSpreadAndExpire(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	topos := redistest.StartTopologies(t)
	for _, topo := range topos {
		t.Run(topo.Name, func(t *testing.T) {
			// A frozen clock at a window's start, so no window ends during
			// the test and every key's remaining life is known.
			window := 10 * time.Minute
			clock := testkit.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).Add(time.Millisecond))
			limiter := newLimiter(t, topo.NewClient(t), ratelimit.Options{KeyPrefix: "spread", Now: clock.Now})
			const identities = 10000
			sem := make(chan struct{}, 64)
			var wg sync.WaitGroup
			var failures atomic.Int64
			var firstErr atomic.Value
			for i := range identities {
				alg := ratelimit.Algorithms()[i%len(ratelimit.Algorithms())]
				checks := []ratelimit.Check{
					{Identity: fmt.Sprintf("id-%d", i), Limit: ratelimit.Limit{Name: "user", Count: 600, Window: window, Algorithm: alg}},
					{Identity: fmt.Sprintf("id-%d", i), Limit: ratelimit.Limit{Name: "POST /auth/*", Count: 5, Window: window, Algorithm: alg}},
				}
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					res, err := limiter.Decide(ctx, 1, checks...)
					if err == nil && !res.Allowed {
						err = errors.New("first request of an identity denied")
					}
					if err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}()
			}
			wg.Wait()
			if failures.Load() > 0 {
				t.Fatalf("%d decisions failed; first: %v", failures.Load(), firstErr.Load())
			}

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var total int
			for _, m := range topo.Masters(t) {
				n := 0
				iter := m.Scan(ctx, 0, "spread:*", 1000).Iterator()
				for iter.Next(ctx) {
					ttl, err := m.PTTL(ctx, iter.Val()).Result()
					if err != nil {
						t.Fatalf("PTTL %s: %v", iter.Val(), err)
					}
					if ttl == -2 { // expired between SCAN and PTTL
						continue
					}
					n++
					if ttl < 0 || ttl > 2*window { // -1: no expiry at all
						t.Errorf("key %s has TTL %s, want within [0, %s]", iter.Val(), ttl, 2*window)
					}
				}
				if err := iter.Err(); err != nil {
					t.Fatalf("scan %s: %v", m.Options().Addr, err)
				}
				if n == 0 {
					t.Errorf("master %s holds no keys", m.Options().Addr)
				}
				t.Logf("master %s: %d keys", m.Options().Addr, n)
				total += n
			}
			// Two limits per identity. A GCRA key lives only while its bucket
			// is not full: after one request, for one emission interval
			// (1 s for 600 per 10 min, 2 min for 5 per 10 min), so the token
			// and leaky buckets' tier keys may be gone already.
			gcraTierKeys := 0
			for i := range identities {
				if a := ratelimit.Algorithms()[i%len(ratelimit.Algorithms())]; a == ratelimit.TokenBucket || a == ratelimit.LeakyBucket {
					gcraTierKeys++
				}
			}
			if minKeys := 2*identities - gcraTierKeys; total < minKeys || total > 2*identities {
				t.Fatalf("found %d keys, want between %d and %d", total, minKeys, 2*identities)
			}
		})
	}
}
