package ratelimit

import (
	"context"
	"fmt"
	"strings"
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
				if c := fwCount % counterBase; c > 10 {
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
				// is 3 (S = (tag*M + previous)*M + current, M = counterBase).
				s, err := client.Get(ctx, sw).Int64()
				if err != nil {
					t.Fatal(err)
				}
				if current := s % counterBase; current != 3 {
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

// TestMixedScriptPutsTheCountersBackExactly: the counters' groups are
// decided first; when a later group denies, every key of theirs must hold
// exactly what it held, with the same expiry, whichever path their script
// would take (this window's INCRBY, a new key, a window change, a value
// not theirs), and their replies must be the ones a peek gives.
func TestMixedScriptPutsTheCountersBackExactly(t *testing.T) {
	ctx := context.Background()
	client := redistest.StartServer(t).Client(t)
	t.Cleanup(func() { client.Close() })
	set := newScriptSet(false)
	window := time.Minute.Microseconds()
	hour := time.Hour.Microseconds()
	t0 := time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC).UnixMicro()
	run := func(t *testing.T, sc *script, keys []string, args ...any) []any {
		t.Helper()
		v, err := sc.run(ctx, client, append([]any{nil, nil, len(keys)}, append(anySlice(keys), args...)...))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// state is a key's value ("" for none) and its PEXPIRETIME.
	type state struct {
		val    string
		expiry int64
	}
	read := func(t *testing.T, key string) state {
		t.Helper()
		v, err := client.Get(ctx, key).Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		e, err := client.Do(ctx, "PEXPIRETIME", key).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return state{v, e}
	}
	// full fills a sliding log of 1 an hour, so that it denies.
	full := func(t *testing.T, key string) {
		t.Helper()
		if err := client.ZAdd(ctx, key, redis.Z{Score: float64(t0), Member: fmt.Sprintf("%d:0", t0)}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := client.PExpire(ctx, key, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The fixed window's function of the mixed script, run alone.
	fixedWindow := lazyScript("fixed window", func() string { return algorithmTable() + "return algorithms['4'](KEYS, ARGV)\n" })
	type counter struct {
		code    int
		sc      *script
		prepare func(t *testing.T, key string, now int64)
	}
	spendAt := func(sc *script, at int64) func(t *testing.T, key string, now int64) {
		return func(t *testing.T, key string, now int64) {
			if v := run(t, sc, []string{key}, "3", 600, window, at); v[0] != int64(1) {
				t.Fatalf("preparing %s: %v", key, v)
			}
		}
	}
	cases := []struct {
		name string
		c    counter
	}{
		{"sliding window: a key of this window", counter{1, set.slidingWindow, nil}},
		{"sliding window: no key", counter{1, set.slidingWindow, func(*testing.T, string, int64) {}}},
		{"sliding window: a key of the window before", counter{1, set.slidingWindow, nil}},
		{"sliding window: a value not its own", counter{1, set.slidingWindow, func(t *testing.T, key string, _ int64) {
			if err := client.Set(ctx, key, "not ours", 90*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}}},
		{"fixed window: a key of this window", counter{4, fixedWindow, nil}},
		{"fixed window: a key of the window before", counter{4, fixedWindow, nil}},
	}
	now := t0 + 20*window
	for i := range cases {
		c := &cases[i]
		if c.c.prepare == nil {
			at := now - time.Second.Microseconds()
			if strings.HasSuffix(c.name, "the window before") {
				at = now - window
			}
			c.c.prepare = spendAt(c.c.sc, at)
		}
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, routeFirst := range []bool{false, true} {
				tag := fmt.Sprintf("{undo%d-%v}", i, routeFirst)
				tier, route := "mx:"+tag+":tier", "mx:"+tag+":sl:login:1:3600000"
				full(t, route)
				tc.c.prepare(t, tier, now)
				before := read(t, tier)
				tierGroup := []any{tc.c.code, 1, 2, 600, window}
				routeGroup := []any{2, 1, 2, 1, hour}
				keys, groups := []string{tier, route}, append(append([]any{}, tierGroup...), routeGroup...)
				if routeFirst {
					keys, groups = []string{route, tier}, append(append([]any{}, routeGroup...), tierGroup...)
				}
				general := append([]any{2}, groups...)
				for _, form := range [][]any{general} {
					args := func(cost string) []any { return append(append([]any{cost}, form...), now) }
					v := run(t, set.mixed, keys, args("1")...)
					if v[0] != int64(0) || len(v) != 11 {
						t.Fatalf("route first %v, %v: reply %v, want a denial of 11 values", routeFirst, form[0], v)
					}
					if after := read(t, tier); after != before {
						t.Fatalf("route first %v, %v: the tier's key went from %+v to %+v on a denied request", routeFirst, form[0], before, after)
					}
					if p := run(t, set.mixed, keys, args("-1")...); fmt.Sprint(p[1:]) != fmt.Sprint(v[1:]) {
						t.Fatalf("route first %v, %v: the denial's reply %v is not the peek's %v", routeFirst, form[0], v, p)
					}
				}
			}
		})
	}

	t.Run("two counters and a route", func(t *testing.T) {
		sw, fw, sl := "mx:{undo-3}:sw", "mx:{undo-3}:fw", "mx:{undo-3}:sl:login:1:3600000"
		full(t, sl)
		spendAt(set.slidingWindow, now-window)(t, sw, now)
		spendAt(fixedWindow, now-time.Second.Microseconds())(t, fw, now)
		before := []state{read(t, sw), read(t, fw)}
		v := run(t, set.mixed, []string{sw, sl, fw}, "1", 3,
			1, 1, 2, 600, window,
			2, 1, 2, 1, hour,
			4, 1, 2, 600, window, now)
		if v[0] != int64(0) || len(v) != 2+3+6+3 {
			t.Fatalf("reply %v, want a denial of 14 values", v)
		}
		if after := []state{read(t, sw), read(t, fw)}; fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("the counters went from %+v to %+v on a denied request", before, after)
		}
	})
}

// TestMixedScaledDenialPutsTheTierBack: under a scale control, the tier's
// spend is decided with the scaled count; when the route then denies, the
// tier's key is as it was (value and expiry), as with no control.
func TestMixedScaledDenialPutsTheTierBack(t *testing.T) {
	ctx := context.Background()
	client := redistest.StartServer(t).Client(t)
	t.Cleanup(func() { client.Close() })
	f := newControlFixture(t, client, "mx-scaled")
	id := "scaled-login"
	tier := Check{Identity: id, Limit: Limit{Name: "user", Count: 6, Window: time.Minute}}
	route := Check{Identity: id, Limit: Limit{Name: "POST /auth/*", Count: 2, Window: time.Hour, Algorithm: SlidingLog}}
	// snapshot is every decision key's value and PEXPIRETIME.
	snapshot := func(t *testing.T) map[string]string {
		t.Helper()
		keys, err := client.Keys(ctx, "mx-scaled:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, k := range keys {
			if k == f.limiter.keys.controlKey(f.limiter.keys.identityTag(id)) || k == f.limiter.keys.networkControlsKey() {
				continue
			}
			typ, err := client.Type(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			e, err := client.Do(ctx, "PEXPIRETIME", k).Int64()
			if err != nil {
				t.Fatal(err)
			}
			v := typ
			if typ == "string" {
				v, err = client.Get(ctx, k).Result()
			} else if typ == "zset" {
				var n int64
				n, err = client.ZCard(ctx, k).Result()
				v = fmt.Sprintf("zset of %d", n)
			}
			if err != nil {
				t.Fatal(err)
			}
			out[k] = fmt.Sprintf("%s expiring at %d", v, e)
		}
		return out
	}
	decide := func(t *testing.T, want bool) {
		t.Helper()
		f.clock.Advance(time.Second)
		if res := f.decide(t, tier, route); res.Allowed != want {
			t.Fatalf("%+v, want allowed %v", res, want)
		}
	}
	denied := func(t *testing.T, what string) {
		t.Helper()
		before := snapshot(t)
		if len(before) != 2 {
			t.Fatalf("keys %v, want the tier's and the route's", before)
		}
		decide(t, false)
		if after := snapshot(t); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("%s: a denied request changed the keys from %v to %v", what, before, after)
		}
	}
	// With no control: the tier counts 1 in its own layout, the route 1
	// of 2.
	decide(t, true)
	// x0.5: the route's 1 is full; the tier is read into the layout of 3.
	f.set(t, id, scale(0.5), time.Hour)
	denied(t, "x0.5, the tier in its own layout")
	// x1.5: the route's 3 admits twice, the tier is stored in the x form
	// of 9; then the route is full.
	f.set(t, id, scale(1.5), time.Hour)
	decide(t, true)
	decide(t, true)
	denied(t, "x1.5, the tier in the x form of 9")
}
