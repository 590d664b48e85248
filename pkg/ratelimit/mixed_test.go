package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestMixedScriptReadsEverySpend runs lua/mixed.lua as the Limiter builds it,
// on a single node and a cluster, with the clock in ARGV. A group whose
// spend denies after its peek admitted (two limits on one key, which the
// Limiter refuses before Redis, but the script must not rely on that) makes
// the request denied: the script never answers admitted when a spend
// denies. And a denial by the group spent last spends nothing on the other.
func TestMixedScriptReadsEverySpend(t *testing.T) {
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
	mixed := newScriptSet(false).mixed
	now := time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC).UnixMicro()
	window := time.Minute.Microseconds()
	for _, topo := range topologies {
		t.Run(topo.name, func(t *testing.T) {
			ctx := context.Background()
			client := topo.client(t)
			decide := func(t *testing.T, keys []string, args ...any) (bool, []any) {
				t.Helper()
				v, err := mixed.run(ctx, client, append([]any{nil, nil, len(keys)}, append(anySlice(keys), args...)...))
				if err != nil {
					t.Fatal(err)
				}
				return v[0] == int64(1), v
			}
			count := func(t *testing.T, cmd *redis.IntCmd) int64 {
				t.Helper()
				n, err := cmd.Result()
				if err != nil && err != redis.Nil {
					t.Fatal(err)
				}
				return n
			}

			t.Run("a spend that denies after its peek", func(t *testing.T) {
				// Group 1: a fixed window of 10 given twice on one key;
				// group 2: a sliding log of 100.
				fw, sl := "mx:{dup}:fw:route:10/1m", "mx:{dup}:sl:login:100:60000"
				admitted := 0
				for range 35 {
					ok, _ := decide(t, []string{fw, fw, sl}, "1", 2,
						4, 2, 2, 10, window, 10, window,
						2, 1, 2, 100, window, now)
					if ok {
						admitted++
					}
				}
				// Each admitted request spends 2 on the doubled key: at
				// most 5 fit in 10.
				if admitted > 5 {
					t.Fatalf("admitted %d of 35 with a limit of 10 given twice on one key; want at most 5 (every spend's answer read)", admitted)
				}
				fwCount, err := client.Get(ctx, fw).Int64()
				if err != nil {
					t.Fatal(err)
				}
				if c := fwCount % 21; c > 10 {
					t.Fatalf("fixed-window key counts %d, over its limit of 10", c)
				}
			})

			t.Run("a denial by the group spent last spends nothing on the other", func(t *testing.T) {
				// Group 1: a sliding window of 600; group 2: a sliding log
				// of 3, spent first.
				sw, sl := "mx:{last}:sw:user:600/1m", "mx:{last}:sl:login:3:60000"
				admitted := 0
				for range 8 {
					ok, _ := decide(t, []string{sw, sl}, "1", 2,
						1, 1, 2, 600, window,
						2, 1, 2, 3, window, now)
					if ok {
						admitted++
					}
				}
				if admitted != 3 {
					t.Fatalf("admitted %d, want the log's 3", admitted)
				}
				// The tier spent only for the admitted: its current count
				// is 3 (S = (tag*P + previous)*M + current, M = 1201).
				s, err := client.Get(ctx, sw).Int64()
				if err != nil {
					t.Fatal(err)
				}
				if current := s % 1201; current != 3 {
					t.Fatalf("tier counts %d after 3 admitted and 5 denied by the route, want 3", current)
				}
				if n := count(t, client.ZCard(ctx, sl)); n != 3 {
					t.Fatalf("log holds %d, want 3", n)
				}
			})

			t.Run("a denial by an earlier group spends nothing on the last", func(t *testing.T) {
				sw, sl := "mx:{first}:sw:user:2/1m", "mx:{first}:sl:login:100:60000"
				admitted := 0
				for range 6 {
					ok, v := decide(t, []string{sw, sl}, "1", 2,
						1, 1, 2, 2, window,
						2, 1, 2, 100, window, now)
					if ok {
						admitted++
					}
					// The answer, now, then the tier's reply (3 values)
					// and the log's (6), flat.
					if len(v) != 11 {
						t.Fatalf("reply of %d values, want 11: %v", len(v), v)
					}
				}
				if admitted != 2 {
					t.Fatalf("admitted %d, want the tier's 2", admitted)
				}
				if n := count(t, client.ZCard(ctx, sl)); n != 2 {
					t.Fatalf("log holds %d after 2 admitted and 4 denied by the tier, want 2", n)
				}
			})
		})
	}
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
