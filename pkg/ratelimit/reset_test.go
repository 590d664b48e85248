package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

func TestResetStartsOnlyTheGivenLimitsOfTheIdentityAfresh(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	topologies := []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"single node", func(t *testing.T) redis.UniversalClient {
			c := redistest.StartServer(t).Client(t)
			t.Cleanup(func() { c.Close() })
			return c
		}},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			c := redistest.StartCluster(t, 3, 0).Client(t)
			t.Cleanup(func() { c.Close() })
			return c
		}},
	}
	hashKey := []byte("reset-test-identity-hash-key-0123456789")
	tier := Limit{Name: "anonymous", Count: 3, Window: time.Minute}
	login := Limit{Name: "POST /auth/*", Count: 2, Window: time.Minute, Algorithm: SlidingLog}
	quota := Limit{Name: "quota", Count: 5, Window: time.Minute, Algorithm: TokenBucket}
	for _, topo := range topologies {
		t.Run(topo.name, func(t *testing.T) {
			ctx := context.Background()
			client := topo.client(t)
			l, err := NewLimiter(client, Options{IdentityHashKey: hashKey, Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			a, b := "ip:203.0.113.7", "ip:198.51.100.9"
			checksOf := func(id string) []Check {
				return []Check{{Identity: id, Limit: tier}, {Identity: id, Limit: login}, {Identity: id, Limit: quota}}
			}
			// a spends its tier and login limits to a denial; b spends one.
			for range 2 {
				if res, err := l.Decide(ctx, 1, checksOf(a)[:2]...); err != nil || !res.Allowed {
					t.Fatalf("spend: %+v, %v", res, err)
				}
			}
			if res, err := l.Decide(ctx, 1, checksOf(a)[:2]...); err != nil || res.Allowed {
				t.Fatalf("third request of a: %+v, %v; want denied by the login limit", res, err)
			}
			if _, err := l.Decide(ctx, 1, checksOf(b)...); err != nil {
				t.Fatal(err)
			}

			// A limiter with another hash key does not find a's keys.
			other, err := NewLimiter(client, Options{IdentityHashKey: []byte("another-identity-hash-key-0123456789"), Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := other.Reset(ctx, checksOf(a)...); err != nil || n != 0 {
				t.Fatalf("reset with another hash key: %d, %v; want 0", n, err)
			}

			// The quota limit of a was never used: two of three had state.
			n, err := l.Reset(ctx, append(checksOf(a), checksOf(a)[0])...)
			if err != nil || n != 2 {
				t.Fatalf("reset a: %d, %v; want 2", n, err)
			}
			peek, err := l.peek(ctx, 1, checksOf(a)...)
			if err != nil || !peek.Allowed {
				t.Fatalf("a after reset: %+v, %v; want allowed", peek, err)
			}
			for i, lim := range []Limit{tier, login, quota} {
				if got := peek.Decisions[i].Remaining; got != lim.Count {
					t.Errorf("a after reset: %s remaining %d, want the whole %d", lim.Name, got, lim.Count)
				}
			}
			peek, err = l.peek(ctx, 1, checksOf(b)...)
			if err != nil {
				t.Fatal(err)
			}
			for i, lim := range []Limit{tier, login, quota} {
				if got := peek.Decisions[i].Remaining; got != lim.Count-1 {
					t.Errorf("b after a's reset: %s remaining %d, want %d (untouched)", lim.Name, got, lim.Count-1)
				}
			}
			if n, err := l.Reset(ctx, checksOf(a)...); err != nil || n != 0 {
				t.Fatalf("second reset of a: %d, %v; want 0", n, err)
			}

			// The key names no count: a reset of the limit under another
			// count resets the same state.
			if _, err := l.Decide(ctx, 1, checksOf(a)[0]); err != nil {
				t.Fatal(err)
			}
			retuned := checksOf(a)[0]
			retuned.Limit.Count++
			if n, err := l.Reset(ctx, retuned); err != nil || n != 1 {
				t.Fatalf("reset of a's tier under another count: %d, %v; want 1", n, err)
			}
		})
	}
}

func TestResetRefusesBadInputAndReportsAnOutage(t *testing.T) {
	l := refusedLimiter(t)
	ctx := context.Background()
	if _, err := l.Reset(ctx); !errors.Is(err, ErrInvalid) {
		t.Errorf("no checks: %v, want ErrInvalid", err)
	}
	if _, err := l.Reset(ctx, Check{Identity: "ip:x", Limit: Limit{Name: "bad", Count: 0, Window: time.Minute}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad limit: %v, want ErrInvalid", err)
	}
	if _, err := l.Reset(ctx, Check{Identity: "ip:x", Limit: Limit{Name: "anonymous", Count: 1, Window: time.Minute}}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("refused connection: %v, want ErrUnavailable", err)
	}
}
