package tests

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// topology is one way of running Redis that every core behaviour must hold
// on: a single node, or a Redis Cluster.
type topology struct {
	name string
	// newClient returns a client with its own connection pool, like the
	// warm client of a separate Lambda instance.
	newClient func(t testing.TB) redis.UniversalClient
	// masters returns one client per master, for inspecting or flushing.
	masters func(t testing.TB) []*redis.Client
	// nodes returns one client per node (masters and replicas).
	nodes func(t testing.TB) []*redis.Client
}

// startTopologies starts a single server and a 3-master cluster with one
// replica each, stopped when t ends.
func startTopologies(t *testing.T) []topology {
	t.Helper()
	single := redistest.StartServer(t)
	cluster := redistest.StartCluster(t, 3, 1)
	clientsFor := func(t testing.TB, addrs []string) []*redis.Client {
		out := make([]*redis.Client, 0, len(addrs))
		for _, a := range addrs {
			c := redis.NewClient(&redis.Options{Addr: a})
			t.Cleanup(func() { _ = c.Close() })
			out = append(out, c)
		}
		return out
	}
	return []topology{
		{
			name:      "single",
			newClient: func(t testing.TB) redis.UniversalClient { return single.Client(t) },
			masters:   func(t testing.TB) []*redis.Client { return clientsFor(t, []string{single.Addr()}) },
			nodes:     func(t testing.TB) []*redis.Client { return clientsFor(t, []string{single.Addr()}) },
		},
		{
			name:      "cluster",
			newClient: func(t testing.TB) redis.UniversalClient { return cluster.Client(t) },
			masters: func(t testing.TB) []*redis.Client {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return clientsFor(t, cluster.MasterAddrs(ctx))
			},
			nodes: func(t testing.TB) []*redis.Client { return clientsFor(t, cluster.Addrs()) },
		},
	}
}

// newLimiter builds a limiter on client with a fresh key prefix, so that
// subtests sharing a server never share state.
func newLimiter(t testing.TB, client redis.UniversalClient, opts ratelimit.Options) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.NewLimiter(client, opts)
	if err != nil {
		t.Fatalf("new limiter: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.LoadScripts(ctx); err != nil {
		t.Fatalf("load scripts: %v", err)
	}
	return l
}

// expectedBurst is how many requests of cost 1 an algorithm admits at one
// instant for a limit of count per window.
func expectedBurst(a ratelimit.Algorithm, count int64) int64 {
	if a == ratelimit.LeakyBucket {
		return 1
	}
	return count
}
