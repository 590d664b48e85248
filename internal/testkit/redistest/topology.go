package redistest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology is one way of running Redis that a behaviour must hold on: a
// single node, or a Redis Cluster.
type Topology struct {
	// Name is "single" or "cluster", for subtest names.
	Name string
	// NewClient returns a client with its own connection pool, like the
	// warm client of a separate process.
	NewClient func(t testing.TB) redis.UniversalClient
	// Masters returns one client per master, for inspecting or flushing.
	Masters func(t testing.TB) []*redis.Client
}

// StartTopologies starts a single server and a 3-master cluster with one
// replica each, stopped when t ends, and returns them in that order.
func StartTopologies(t *testing.T) []Topology {
	t.Helper()
	single := StartServer(t)
	cluster := StartCluster(t, 3, 1)
	clientsFor := func(t testing.TB, addrs []string) []*redis.Client {
		out := make([]*redis.Client, 0, len(addrs))
		for _, a := range addrs {
			c := redis.NewClient(&redis.Options{Addr: a})
			t.Cleanup(func() { _ = c.Close() })
			out = append(out, c)
		}
		return out
	}
	return []Topology{
		{
			Name:      "single",
			NewClient: func(t testing.TB) redis.UniversalClient { return single.Client(t) },
			Masters:   func(t testing.TB) []*redis.Client { return clientsFor(t, []string{single.Addr()}) },
		},
		{
			Name:      "cluster",
			NewClient: func(t testing.TB) redis.UniversalClient { return cluster.Client(t) },
			Masters: func(t testing.TB) []*redis.Client {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				return clientsFor(t, cluster.MasterAddrs(ctx))
			},
		},
	}
}

// WarmPool opens n connections of c's pool (on every master of a cluster
// client), so that a burst that follows measures decisions, not dialing.
// Failures are left to the burst to meet.
func WarmPool(t testing.TB, c redis.UniversalClient, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if cc, ok := c.(*redis.ClusterClient); ok {
				_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
				return
			}
			_ = c.Ping(ctx).Err()
		}()
	}
	wg.Wait()
}
