package controls_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
	"github.com/slidegate/slidegate/pkg/ratelimit/internal/ctlstore"
	"github.com/slidegate/slidegate/pkg/ratelimit/internal/keys"
)

// keysOf is the key space of l's controls.
func keysOf(l *ratelimit.Limiter) keys.Space { return controls.KeysOf(l.Controls()) }

// adminLimiter is a ratelimit.Limiter for the admin calls with its own key prefix.
func adminLimiter(t *testing.T, client redis.UniversalClient, prefix string, now func() time.Time) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: prefix, IdentityHashKey: []byte("controls-admin-test-key-0123456789"), Timeout: 5 * time.Second, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// redisNow is the server's clock: the controls' ends are on it.
func redisNow(t *testing.T, client redis.UniversalClient) time.Time {
	t.Helper()
	now, err := client.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

func sameControl(a, b controls.Control) bool {
	return a.Kind == b.Kind && a.Factor == b.Factor && a.Until.Equal(b.Until) && a.Reason == b.Reason && a.SetBy == b.SetBy && a.SetAt.Equal(b.SetAt)
}

func TestControlsRoundTrip(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			ctx := context.Background()
			client := topo.NewClient(t)
			l := adminLimiter(t, client, "ctlrt", nil)
			now := redisNow(t, client)
			block := controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "credential stuffing", SetBy: "ops@example"}
			exempt := controls.Control{Kind: controls.Exempt, Until: now.Add(2 * time.Hour), Reason: "uptime monitor"}
			scale := controls.Control{Kind: controls.Scale, Factor: 10, Until: now.Add(30 * time.Minute), Reason: "launch", SetBy: "arn:aws:iam::123456789012:user/ops"}
			ids := map[string]controls.Control{"key:alpha": block, "ip:203.0.113.7": exempt, "sub:launch": scale}
			for id, c := range ids {
				if err := l.Controls().Set(ctx, id, c); err != nil {
					t.Fatalf("set %s: %v", id, err)
				}
			}
			for id, want := range ids {
				got, ok, err := l.Controls().Get(ctx, id)
				if err != nil || !ok {
					t.Fatalf("get %s: %v, %v", id, ok, err)
				}
				if got.SetAt.Before(now.Truncate(time.Millisecond)) || got.SetAt.After(now.Add(time.Minute)) {
					t.Errorf("get %s: SetAt %s, want Redis's time at the set (after %s)", id, got.SetAt, now)
				}
				want.SetAt = got.SetAt
				if !sameControl(got, want) {
					t.Errorf("get %s = %+v, want %+v", id, got, want)
				}
				// The record expires when the control ends, on Redis's clock.
				at, err := client.PExpireTime(ctx, keysOf(l).ControlKey(keysOf(l).Tag(id))).Result()
				if err != nil || at != time.Duration(controls.CeilMilli(want.Until))*time.Millisecond {
					t.Errorf("record of %s expires at %v (%v), want %d ms", id, at, err, controls.CeilMilli(want.Until))
				}
			}
			if _, ok, err := l.Controls().Get(ctx, "key:unknown"); ok || err != nil {
				t.Fatalf("get of an identity without control: %v, %v", ok, err)
			}
			// The index expires with the last control.
			if at, err := client.PExpireTime(ctx, keysOf(l).ControlIndexKey()).Result(); err != nil || at != time.Duration(controls.CeilMilli(exempt.Until))*time.Millisecond {
				t.Errorf("index expires at %v (%v), want the exemption's end", at, err)
			}

			list, err := l.Controls().List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantOrder := []string{"sub:launch", "key:alpha", "ip:203.0.113.7"} // soonest end first
			if len(list) != len(wantOrder) {
				t.Fatalf("list = %+v, want %d entries", list, len(wantOrder))
			}
			for i, id := range wantOrder {
				if list[i].Tag != keysOf(l).Tag(id) || list[i].Malformed || list[i].Control.Kind != ids[id].Kind || list[i].Control.Reason != ids[id].Reason {
					t.Errorf("list[%d] = %+v, want %s's %s", i, list[i], id, ids[id].Kind)
				}
				if strings.Contains(list[i].Tag, id) {
					t.Errorf("list[%d] names the identity in clear: %q", i, list[i].Tag)
				}
			}

			// Replacing: one control per identity, the index moved.
			shorter := controls.Control{Kind: controls.Scale, Factor: 0.1, Until: now.Add(10 * time.Minute), Reason: "suspect"}
			if err := l.Controls().Set(ctx, "key:alpha", shorter); err != nil {
				t.Fatal(err)
			}
			if got, _, _ := l.Controls().Get(ctx, "key:alpha"); got.Kind != controls.Scale || got.Factor != 0.1 {
				t.Fatalf("replaced control = %+v", got)
			}
			if list, _ := l.Controls().List(ctx); len(list) != 3 || list[0].Tag != keysOf(l).Tag("key:alpha") {
				t.Fatalf("list after replacing = %+v, want 3 with key:alpha first", list)
			}

			lifted, ok, err := l.Controls().Lift(ctx, "key:alpha")
			if err != nil || !ok || lifted.Kind != controls.Scale || lifted.Reason != "suspect" {
				t.Fatalf("lift = %+v, %v, %v", lifted, ok, err)
			}
			if _, ok, err := l.Controls().Get(ctx, "key:alpha"); ok || err != nil {
				t.Fatalf("get after lift: %v, %v", ok, err)
			}
			if _, ok, err := l.Controls().Lift(ctx, "key:alpha"); ok || err != nil {
				t.Fatalf("second lift: %v, %v", ok, err)
			}
			if n, err := client.ZCard(ctx, keysOf(l).ControlIndexKey()).Result(); err != nil || n != 2 {
				t.Fatalf("index after lift holds %d (%v), want 2", n, err)
			}
			if list, _ := l.Controls().List(ctx); len(list) != 2 {
				t.Fatalf("list after lift = %+v", list)
			}

			// Networks.
			n24 := netip.MustParsePrefix("203.0.113.0/24")
			n6 := netip.MustParsePrefix("2001:db8::/48")
			nblock := controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "scraper", SetBy: "ops"}
			nexempt := controls.Control{Kind: controls.Exempt, Until: now.Add(time.Hour), Reason: "office"}
			if err := l.Controls().SetNetwork(ctx, n6, nexempt); err != nil {
				t.Fatal(err)
			}
			if err := l.Controls().SetNetwork(ctx, n24, nblock); err != nil {
				t.Fatal(err)
			}
			nets, err := l.Controls().Networks(ctx)
			if err != nil || len(nets) != 2 {
				t.Fatalf("network controls = %+v, %v", nets, err)
			}
			if nets[0].Prefix != n24 || nets[0].Control.Kind != controls.Block || nets[0].Control.SetBy != "ops" || nets[1].Prefix != n6 || nets[1].Control.Kind != controls.Exempt {
				t.Fatalf("network controls = %+v, want the block first", nets)
			}
			if field, err := client.HGet(ctx, keysOf(l).NetworkControlsKey(), "203.0.113.0/24").Result(); err != nil || !strings.HasPrefix(field, "v1 b ") {
				t.Fatalf("hash field = %q, %v", field, err)
			}
			got, ok, err := l.Controls().LiftNetwork(ctx, n24)
			if err != nil || !ok || got.Reason != "scraper" {
				t.Fatalf("lift network = %+v, %v, %v", got, ok, err)
			}
			if _, ok, err := l.Controls().LiftNetwork(ctx, n24); ok || err != nil {
				t.Fatalf("second lift network: %v, %v", ok, err)
			}
			if nets, err := l.Controls().Networks(ctx); err != nil || len(nets) != 1 || nets[0].Prefix != n6 {
				t.Fatalf("network controls after lift = %+v, %v", nets, err)
			}
		})
	}
}

// TestControlsExpireOnRedisClock: a short control ends by itself, record,
// index and network hash included, with nobody cleaning up.
func TestControlsExpireOnRedisClock(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			ctx := context.Background()
			client := topo.NewClient(t)
			l := adminLimiter(t, client, "ctlexp", nil)
			end := redisNow(t, client).Add(400 * time.Millisecond)
			if err := l.Controls().Set(ctx, "key:short", controls.Control{Kind: controls.Block, Until: end, Reason: "short"}); err != nil {
				t.Fatal(err)
			}
			n := netip.MustParsePrefix("198.51.100.0/24")
			if err := l.Controls().SetNetwork(ctx, n, controls.Control{Kind: controls.Block, Until: end, Reason: "short"}); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := l.Controls().Get(ctx, "key:short"); !ok {
				t.Fatal("the control is not in force right after it was set")
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, ok, err := l.Controls().Get(ctx, "key:short")
				if err != nil {
					t.Fatal(err)
				}
				keys, _ := client.Exists(ctx, keysOf(l).ControlKey(keysOf(l).Tag("key:short")), keysOf(l).ControlIndexKey(), keysOf(l).NetworkControlsKey()).Result()
				if !ok && keys == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("10 s after a 400 ms control: in force %v, %d of its keys left", ok, keys)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !redisNow(t, client).After(end) {
				t.Fatal("the keys went before the control's end")
			}
			if list, err := l.Controls().List(ctx); err != nil || len(list) != 0 {
				t.Fatalf("list after the end = %+v, %v", list, err)
			}
			if nets, err := l.Controls().Networks(ctx); err != nil || len(nets) != 0 {
				t.Fatalf("network controls after the end = %+v, %v", nets, err)
			}
		})
	}
}

func TestControlsRefuseBadInput(t *testing.T) {
	client := redistest.StartServer(t).Client(t)
	ctx := context.Background()
	l := adminLimiter(t, client, "ctlbad", nil)
	now := redisNow(t, client)
	ok := controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "r"}
	for name, call := range map[string]func() error{
		"no identity": func() error { return l.Controls().Set(ctx, "", ok) },
		"ended": func() error {
			return l.Controls().Set(ctx, "id", controls.Control{Kind: controls.Block, Until: now.Add(-time.Second), Reason: "r"})
		},
		"too long": func() error {
			return l.Controls().Set(ctx, "id", controls.Control{Kind: controls.Block, Until: now.Add(controls.MaxDuration + time.Hour), Reason: "r"})
		},
		"no reason": func() error {
			return l.Controls().Set(ctx, "id", controls.Control{Kind: controls.Block, Until: now.Add(time.Hour)})
		},
		"host bits":   func() error { return l.Controls().SetNetwork(ctx, netip.MustParsePrefix("203.0.113.7/24"), ok) },
		"4in6":        func() error { return l.Controls().SetNetwork(ctx, netip.MustParsePrefix("::ffff:203.0.113.0/120"), ok) },
		"zero prefix": func() error { return l.Controls().SetNetwork(ctx, netip.Prefix{}, ok) },
		"scaled network": func() error {
			return l.Controls().SetNetwork(ctx, netip.MustParsePrefix("10.0.0.0/8"), controls.Control{Kind: controls.Scale, Factor: 2, Until: ok.Until, Reason: "r"})
		},
		"ended network": func() error {
			return l.Controls().SetNetwork(ctx, netip.MustParsePrefix("10.0.0.0/8"), controls.Control{Kind: controls.Block, Until: now, Reason: "r"})
		},
		"lift host bits": func() error {
			_, _, err := l.Controls().LiftNetwork(ctx, netip.MustParsePrefix("10.0.0.1/8"))
			return err
		},
		"lift no identity": func() error { _, _, err := l.Controls().Lift(ctx, ""); return err },
		"get no identity":  func() error { _, _, err := l.Controls().Get(ctx, ""); return err },
		"exempt with scale": func() error {
			return l.Controls().Set(ctx, "id", controls.Control{Kind: controls.Exempt, Factor: 2, Until: ok.Until, Reason: "r"})
		},
	} {
		if err := call(); !errors.Is(err, ratelimit.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n, err := client.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("refused calls left %d keys (%v)", n, err)
	}
}

// TestControlsBounds: past controls.MaxControls and controls.MaxNetworks in force, a
// new identity or network is refused; replacing one is not; ended entries
// do not count.
func TestControlsBounds(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			ctx := context.Background()
			client := topo.NewClient(t)
			l := adminLimiter(t, client, "ctlmax", nil)
			now := redisNow(t, client)
			c := controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "flood"}
			index := keysOf(l).ControlIndexKey()
			members := make([]redis.Z, 0, controls.MaxControls)
			members = append(members, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: keysOf(l).Tag("key:present")})
			for i := 1; i < controls.MaxControls; i++ {
				members = append(members, redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: fmt.Sprintf("fake-%05d", i)})
			}
			if err := client.ZAdd(ctx, index, members...).Err(); err != nil {
				t.Fatal(err)
			}
			err := l.Controls().Set(ctx, "key:new", c)
			if !errors.Is(err, ratelimit.ErrInvalid) || !errors.Is(err, controls.ErrTooMany) {
				t.Fatalf("set past the bound: %v, want ratelimit.ErrInvalid and controls.ErrTooMany", err)
			}
			if _, ok, _ := l.Controls().Get(ctx, "key:new"); ok {
				t.Fatal("a refused control was written")
			}
			if err := l.Controls().Set(ctx, "key:present", c); err != nil {
				t.Fatalf("replacing a listed identity's control at the bound: %v", err)
			}
			// One entry ended: pruned at the next set, which then fits.
			if err := client.ZAdd(ctx, index, redis.Z{Score: float64(now.Add(-time.Second).UnixMilli()), Member: "fake-00001"}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := l.Controls().Set(ctx, "key:new", c); err != nil {
				t.Fatalf("set once an entry ended: %v", err)
			}
			if n, _ := client.ZCard(ctx, index).Result(); n != controls.MaxControls {
				t.Fatalf("index holds %d, want %d", n, controls.MaxControls)
			}

			hash := keysOf(l).NetworkControlsKey()
			fields := make([]any, 0, 2*controls.MaxNetworks)
			for i := range controls.MaxNetworks {
				p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
				fields = append(fields, p.String(), controls.FormatRecord(controls.Control{Kind: controls.Exempt, Until: now.Add(time.Hour), Reason: "f", SetAt: now}))
			}
			if err := client.HSet(ctx, hash, fields...).Err(); err != nil {
				t.Fatal(err)
			}
			err = l.Controls().SetNetwork(ctx, netip.MustParsePrefix("192.0.2.0/24"), c)
			if !errors.Is(err, ratelimit.ErrInvalid) || !errors.Is(err, controls.ErrTooMany) {
				t.Fatalf("network past the bound: %v", err)
			}
			if err := l.Controls().SetNetwork(ctx, netip.MustParsePrefix("10.0.0.0/24"), c); err != nil {
				t.Fatalf("replacing a network's control at the bound: %v", err)
			}
			ended := controls.FormatRecord(controls.Control{Kind: controls.Exempt, Until: now.Add(-time.Second), Reason: "f", SetAt: now.Add(-time.Hour)})
			if err := client.HSet(ctx, hash, "10.0.1.0/24", ended).Err(); err != nil {
				t.Fatal(err)
			}
			if err := l.Controls().SetNetwork(ctx, netip.MustParsePrefix("192.0.2.0/24"), c); err != nil {
				t.Fatalf("network once one ended: %v", err)
			}
			// The identity controls' mirrors do not count against the
			// networks' bound: 1,000 networks and 2 identities.
			if n, _ := client.HLen(ctx, hash).Result(); n != controls.MaxNetworks+2 {
				t.Fatalf("hash holds %d fields, want %d (the ended one pruned, and the 2 identities)", n, controls.MaxNetworks+2)
			}
			for _, id := range []string{"key:present", "key:new"} {
				got, err := client.HGet(ctx, hash, ctlstore.IdentityField(keysOf(l).Tag(id))).Result()
				if err != nil || got != strconv.FormatInt(c.Until.UnixMicro(), 10) {
					t.Fatalf("%s's watch field = %q, %v; want its end %d", id, got, err, c.Until.UnixMicro())
				}
			}
			nets, err := l.Controls().Networks(ctx)
			if err != nil || len(nets) != controls.MaxNetworks || nets[0].Control.Kind != controls.Block || nets[1].Control.Kind != controls.Block || nets[2].Control.Kind != controls.Exempt {
				t.Fatalf("network controls: %d, %v; want %d, the two blocks first", len(nets), err, controls.MaxNetworks)
			}

			// The hash bounds the identity fields on its own too, pruning
			// the ended ones: a hash already past ctlstore.MaxWatched (as
			// written before the overflow field) takes a new identity's
			// end in the overflow field, not in a field of its own, and
			// grows by that one field at most.
			for _, k := range []string{index, hash} {
				if err := client.Del(ctx, k).Err(); err != nil {
					t.Fatal(err)
				}
			}
			ids := make([]any, 0, 2*controls.MaxControls)
			for i := range controls.MaxControls {
				ids = append(ids, fmt.Sprintf("i:fake-%05d", i), strconv.FormatInt(now.Add(time.Hour).UnixMicro(), 10))
			}
			if err := client.HSet(ctx, hash, ids...).Err(); err != nil {
				t.Fatal(err)
			}
			if err := l.Controls().Set(ctx, "key:third", c); err != nil {
				t.Fatalf("identity past the hash's bound: %v", err)
			}
			if _, ok, _ := l.Controls().Get(ctx, "key:third"); !ok {
				t.Fatal("a control mirrored in the overflow field was not written")
			}
			if got, err := client.HGet(ctx, hash, ctlstore.OverflowField).Result(); err != nil || got != strconv.FormatInt(c.Until.UnixMicro(), 10) {
				t.Fatalf("overflow field = %q, %v; want the control's end %d", got, err, c.Until.UnixMicro())
			}
			if n, _ := client.HExists(ctx, hash, ctlstore.IdentityField(keysOf(l).Tag("key:third"))).Result(); n {
				t.Fatal("an identity past the bound got a field of its own")
			}
			if err := client.HSet(ctx, hash, "i:fake-00000", strconv.FormatInt(now.Add(-time.Second).UnixMicro(), 10)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := l.Controls().Set(ctx, "key:fourth", c); err != nil {
				t.Fatalf("identity once a watched one ended: %v", err)
			}
			if n, _ := client.HLen(ctx, hash).Result(); n != controls.MaxControls {
				t.Fatalf("hash holds %d identity fields, want %d (the ended one pruned, the overflow field added)", n, controls.MaxControls)
			}
		})
	}
}

func TestMalformedControlRecords(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			ctx := context.Background()
			client := topo.NewClient(t)
			l := adminLimiter(t, client, "ctlbadrec", nil)
			now := redisNow(t, client)
			tag := keysOf(l).Tag("key:garbled")
			if err := client.Set(ctx, keysOf(l).ControlKey(tag), "v1 b soon 0 {}", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			if err := client.ZAdd(ctx, keysOf(l).ControlIndexKey(), redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: tag}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := l.Controls().Set(ctx, "key:fine", controls.Control{Kind: controls.Exempt, Until: now.Add(time.Hour), Reason: "r"}); err != nil {
				t.Fatal(err)
			}
			_, ok, err := l.Controls().Get(ctx, "key:garbled")
			if ok || !errors.Is(err, controls.ErrMalformed) || !strings.Contains(err.Error(), "ignored") {
				t.Fatalf("get of a malformed record: %v, %v; want an error wrapping controls.ErrMalformed", ok, err)
			}
			list, err := l.Controls().List(ctx)
			if err != nil || len(list) != 2 {
				t.Fatalf("list = %+v, %v", list, err)
			}
			malformed := 0
			for _, e := range list {
				if e.Malformed {
					malformed++
					if e.Tag != tag || e.Control != (controls.Control{}) {
						t.Errorf("malformed entry = %+v", e)
					}
				}
			}
			if malformed != 1 {
				t.Fatalf("list = %+v, want one malformed entry", list)
			}
			if _, ok, err := l.Controls().Lift(ctx, "key:garbled"); !ok || err != nil {
				t.Fatalf("lift of a malformed record: %v, %v", ok, err)
			}
			if n, _ := client.Exists(ctx, keysOf(l).ControlKey(tag)).Result(); n != 0 {
				t.Fatal("the malformed record outlived its lift")
			}

			hash := keysOf(l).NetworkControlsKey()
			good := controls.FormatRecord(controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "r", SetAt: now})
			scale := controls.FormatRecord(controls.Control{Kind: controls.Scale, Factor: 2, Until: now.Add(time.Hour), Reason: "r", SetAt: now})
			if err := client.HSet(ctx, hash,
				"192.0.2.0/24", good,
				"198.51.100.0/24", "v1 b",
				"not-a-network", good,
				"10.0.0.1/8", good,
				"::ffff:10.0.0.0/104", good,
				"2001:DB8::/32", good,
				"203.0.113.0/24", scale,
			).Err(); err != nil {
				t.Fatal(err)
			}
			nets, err := l.Controls().Networks(ctx)
			if len(nets) != 1 || nets[0].Prefix != netip.MustParsePrefix("192.0.2.0/24") {
				t.Fatalf("network controls = %+v, want the one readable", nets)
			}
			if !errors.Is(err, controls.ErrMalformed) || !strings.Contains(err.Error(), "6 field(s)") {
				t.Fatalf("network controls error = %v, want 6 malformed fields counted", err)
			}
			// A write with malformed fields present still works.
			if err := l.Controls().SetNetwork(ctx, netip.MustParsePrefix("192.0.2.0/24"), controls.Control{Kind: controls.Exempt, Until: now.Add(time.Hour), Reason: "r"}); err != nil {
				t.Fatal(err)
			}
			if got, ok, err := l.Controls().LiftNetwork(ctx, netip.MustParsePrefix("198.51.100.0/24")); !ok || err != nil || got != (controls.Control{}) {
				t.Fatalf("lift of a malformed network record: %+v, %v, %v", got, ok, err)
			}
		})
	}
}

// countingHook counts HGETALL commands: the cache's reads.
type countingHook struct{ reads atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hgetall" {
			h.reads.Add(1)
		}
		return next(ctx, cmd)
	}
}

// TestNetworkControlCacheStaleness: a change is seen after at most the
// interval, on a stepped clock; an ended control stops applying at once.
func TestNetworkControlCacheStaleness(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			ctx := context.Background()
			client := topo.NewClient(t)
			hook := &countingHook{}
			client.AddHook(hook)
			// Real time at the start: Redis expires the records on its clock.
			clock := testkit.NewClock(redisNow(t, client).Truncate(time.Millisecond))
			l := adminLimiter(t, client, "ctlcache", clock.Now)
			cache := controls.NewNetworkControlCache(l.Controls(), 0)
			if nets, err := cache.Get(ctx); err != nil || len(nets) != 0 {
				t.Fatalf("first get = %+v, %v", nets, err)
			}
			n := netip.MustParsePrefix("203.0.113.0/24")
			if err := l.Controls().SetNetwork(ctx, n, controls.Control{Kind: controls.Block, Until: clock.Now().Add(time.Hour), Reason: "abuse"}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(controls.Propagation - time.Millisecond)
			if nets, _ := cache.Get(ctx); len(nets) != 0 {
				t.Fatalf("within the interval: %+v, want the cached empty list", nets)
			}
			clock.Advance(time.Millisecond)
			nets, err := cache.Get(ctx)
			if err != nil || len(nets) != 1 || nets[0].Prefix != n || nets[0].Control.Kind != controls.Block {
				t.Fatalf("at the interval: %+v, %v; want the block", nets, err)
			}
			if got := hook.reads.Load(); got != 2 {
				t.Fatalf("%d reads, want 2 (one per interval)", got)
			}
			// An end applies at every Get, without a read.
			if err := l.Controls().SetNetwork(ctx, n, controls.Control{Kind: controls.Block, Until: clock.Now().Add(controls.Propagation + 500*time.Millisecond), Reason: "abuse"}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(controls.Propagation)
			held, _ := cache.Get(ctx)
			if len(held) != 1 || !held[0].Control.Until.Equal(clock.Now().Add(500*time.Millisecond)) {
				t.Fatalf("after the new read: %+v", held)
			}
			clock.Advance(500 * time.Millisecond)
			if nets, _ := cache.Get(ctx); len(nets) != 0 {
				t.Fatalf("at the control's end: %+v, want none", nets)
			}
			if len(held) != 1 || held[0].Prefix != n {
				t.Fatalf("a list handed out before changed: %+v", held)
			}
			if got := hook.reads.Load(); got != 3 {
				t.Fatalf("%d reads, want 3", got)
			}
			// A failed read keeps the last good list, says so once, and
			// waits an interval before the next.
			if err := l.Controls().SetNetwork(ctx, n, controls.Control{Kind: controls.Exempt, Until: clock.Now().Add(time.Hour), Reason: "office"}); err != nil {
				t.Fatal(err)
			}
			clock.Advance(controls.Propagation)
			if nets, _ := cache.Get(ctx); len(nets) != 1 || nets[0].Control.Kind != controls.Exempt {
				t.Fatalf("before the outage: %+v", nets)
			}
			broken := topo.NewClient(t)
			brokenLimiter := adminLimiter(t, broken, "ctlcache", clock.Now)
			brokenCache := controls.NewNetworkControlCache(brokenLimiter.Controls(), 0)
			if nets, err := brokenCache.Get(ctx); err != nil || len(nets) != 1 {
				t.Fatalf("a second cache: %+v, %v", nets, err)
			}
			_ = broken.Close()
			clock.Advance(controls.Propagation)
			nets, err = brokenCache.Get(ctx)
			if !errors.Is(err, ratelimit.ErrUnavailable) || len(nets) != 1 || nets[0].Control.Kind != controls.Exempt {
				t.Fatalf("failed read: %+v, %v; want the last list and ErrUnavailable", nets, err)
			}
			if nets, err := brokenCache.Get(ctx); err != nil || len(nets) != 1 {
				t.Fatalf("after a failed read, within the interval: %+v, %v; want the last list, no read", nets, err)
			}
		})
	}
}

// TestNetworkControlCacheKeepsBlocksPastTheBound: more fields than
// controls.MaxNetworks keep every block and say so.
func TestNetworkControlCacheKeepsBlocksPastTheBound(t *testing.T) {
	client := redistest.StartServer(t).Client(t)
	ctx := context.Background()
	now := redisNow(t, client)
	l := adminLimiter(t, client, "ctlcachemax", nil)
	fields := make([]any, 0, 2*(controls.MaxNetworks+1))
	for i := range controls.MaxNetworks + 1 {
		kind := controls.Exempt
		if i%3 == 0 {
			kind = controls.Block
		}
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
		fields = append(fields, p.String(), controls.FormatRecord(controls.Control{Kind: kind, Until: now.Add(time.Hour), Reason: "f", SetAt: now}))
	}
	if err := client.HSet(ctx, keysOf(l).NetworkControlsKey(), fields...).Err(); err != nil {
		t.Fatal(err)
	}
	nets, err := controls.NewNetworkControlCache(l.Controls(), 0).Get(ctx)
	if !errors.Is(err, controls.ErrTooMany) || len(nets) != controls.MaxNetworks {
		t.Fatalf("%d controls, %v; want %d and controls.ErrTooMany", len(nets), err, controls.MaxNetworks)
	}
	blocks := 0
	for _, nc := range nets {
		if nc.Control.Kind == controls.Block {
			blocks++
		}
	}
	if want := (controls.MaxNetworks + 3) / 3; blocks != want {
		t.Fatalf("%d blocks kept, want all %d", blocks, want)
	}
}

// TestNetworkControlCacheReadsOnceForConcurrentGets: concurrent Gets make
// one read per interval; before the first, they wait for it.
func TestNetworkControlCacheReadsOnceForConcurrentGets(t *testing.T) {
	client := redistest.StartServer(t).Client(t)
	hook := &countingHook{}
	client.AddHook(hook)
	ctx := context.Background()
	clock := testkit.NewClock(redisNow(t, client))
	l := adminLimiter(t, client, "ctlcacheconc", clock.Now)
	if err := l.Controls().SetNetwork(ctx, netip.MustParsePrefix("192.0.2.0/24"), controls.Control{Kind: controls.Block, Until: clock.Now().Add(time.Hour), Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	cache := controls.NewNetworkControlCache(l.Controls(), time.Second)
	burst := func() {
		var wg sync.WaitGroup
		var empty atomic.Int64
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				nets, _ := cache.Get(ctx)
				if len(nets) != 1 {
					empty.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := empty.Load(); n != 0 {
			t.Fatalf("%d of 50 Gets answered without the block", n)
		}
	}
	burst()
	if got := hook.reads.Load(); got != 1 {
		t.Fatalf("50 concurrent first Gets made %d reads, want 1", got)
	}
	clock.Advance(time.Second)
	burst()
	if got := hook.reads.Load(); got != 2 {
		t.Fatalf("50 concurrent Gets past the interval made %d reads in all, want 2", got)
	}
}

// BenchmarkNetworkControlCacheGet: a Get that finds the list fresh, the
// request path's cost, with one network control and with the most
// allowed.
func BenchmarkNetworkControlCacheGet(b *testing.B) {
	client := redistest.StartServer(b).Client(b)
	ctx := context.Background()
	now, err := client.Time(ctx).Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, controls.MaxNetworks} {
		b.Run(fmt.Sprintf("controls=%d", n), func(b *testing.B) {
			l, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: fmt.Sprintf("bench%d", n), Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			fields := make([]any, 0, 2*n)
			for i := range n {
				p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
				fields = append(fields, p.String(), controls.FormatRecord(controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "bench", SetAt: now}))
			}
			if err := client.HSet(ctx, keysOf(l).NetworkControlsKey(), fields...).Err(); err != nil {
				b.Fatal(err)
			}
			cache := controls.NewNetworkControlCache(l.Controls(), time.Hour)
			if nets, err := cache.Get(ctx); err != nil || len(nets) != n {
				b.Fatalf("%d controls, %v", len(nets), err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if nets, _ := cache.Get(ctx); len(nets) != n {
					b.Fatal(len(nets))
				}
			}
		})
	}
}
