package ratelimit

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
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// scriptHook counts, per command sent, the decisions' controlled and plain
// script calls (by SHA-1) and the watch's reads (HGETALL).
type scriptHook struct {
	controlled map[string]bool
	plain      map[string]bool

	controlledCalls, plainCalls, reads atomic.Int64
}

func newScriptHook(l *Limiter) *scriptHook {
	h := &scriptHook{controlled: map[string]bool{}, plain: map[string]bool{}}
	if sc := l.scripts.controlled; sc != nil {
		h.controlled[sc.sha()] = true
	}
	for _, sc := range []*script{l.scripts.slidingWindow, l.scripts.slidingLog, l.scripts.gcra, l.scripts.slidingBuckets, l.scripts.mixed} {
		h.plain[sc.sha()] = true
	}
	return h
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "hgetall":
			h.reads.Add(1)
		case "evalsha":
			sha, _ := cmd.Args()[1].(string)
			switch {
			case h.controlled[sha]:
				h.controlledCalls.Add(1)
			case h.plain[sha]:
				h.plainCalls.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}

// counts is the hook's counts since the last call.
func (h *scriptHook) counts() (controlled, plain, reads int64) {
	return h.controlledCalls.Swap(0), h.plainCalls.Swap(0), h.reads.Swap(0)
}

// watchFixture is a Limiter reading controls on a stepped clock that
// starts at Redis's time (Store.Set's records expire on Redis's clock).
type watchFixture struct {
	client redis.UniversalClient
	clock  *testkit.Clock
	l      *Limiter
	hook   *scriptHook
	ctx    context.Context
}

func newWatchFixture(t *testing.T, client redis.UniversalClient, prefix string) *watchFixture {
	t.Helper()
	f := &watchFixture{client: client, clock: testkit.NewClock(redisNow(t, client).Truncate(time.Millisecond)), ctx: context.Background()}
	f.l = loadedLimiter(t, client, Options{KeyPrefix: prefix, Now: f.clock.Now, Controls: true, Timeout: 5 * time.Second})
	f.hook = newScriptHook(f.l)
	client.AddHook(f.hook)
	return f
}

var watchLimit = Limit{Name: "u", Count: 1000, Window: time.Hour}

func (f *watchFixture) decide(t *testing.T, ids ...string) Result {
	t.Helper()
	checks := make([]Check, len(ids))
	for i, id := range ids {
		checks[i] = Check{Identity: id, Limit: watchLimit}
	}
	res, err := f.l.Decide(f.ctx, 1, checks...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// expect checks the hook's counts since the last expect.
func (f *watchFixture) expect(t *testing.T, what string, controlled, plain, reads int64) {
	t.Helper()
	c, p, r := f.hook.counts()
	if c != controlled || p != plain || r != reads {
		t.Fatalf("%s: %d controlled script calls, %d plain, %d reads of the hash; want %d, %d, %d", what, c, p, r, controlled, plain, reads)
	}
}

// TestControlWatchAppliesANewControlAfterItsRead: a control set with
// Store.Set applies from the first decision after the watch's next read,
// controls.Propagation after its last one on the stepped clock; until then
// the decisions run the plain script. Lifting applies at once (the control
// key is still read); the watch then drops the identity at its next read.
func TestControlWatchAppliesANewControlAfterItsRead(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			f := newWatchFixture(t, topo.NewClient(t), "watch-new")
			if res := f.decide(t, "A"); !res.Allowed {
				t.Fatalf("first decision: %+v", res)
			}
			f.expect(t, "the first decision", 0, 1, 1)
			if err := f.l.Controls().Set(f.ctx, "A", block(f.clock.Now().Add(time.Hour))); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(controls.Propagation - time.Microsecond)
			if res := f.decide(t, "A"); !res.Allowed || res.Control.Kind != controls.None {
				t.Fatalf("before the watch's next read: %+v, want admitted, no control read", res)
			}
			f.expect(t, "before the watch's next read", 0, 1, 0)
			f.clock.Advance(time.Microsecond)
			if res := f.decide(t, "A"); res.Allowed || res.Control.Kind != controls.Block {
				t.Fatalf("after the watch's read: %+v, want blocked", res)
			}
			f.expect(t, "the decision that read the watch", 1, 0, 1)
			if st := f.l.watchReport(); !st.Loaded || st.Identities != 1 || st.Overflow || !st.ReadAt.Equal(f.clock.Now()) {
				t.Fatalf("watch state %+v", st)
			}
			// Lifted: the key is still read, and says no control.
			if _, ok, err := f.l.Controls().Lift(f.ctx, "A"); !ok || err != nil {
				t.Fatalf("lift: %v, %v", ok, err)
			}
			if res := f.decide(t, "A"); !res.Allowed || res.Control.Kind != controls.None {
				t.Fatalf("right after the lift: %+v, want admitted", res)
			}
			f.expect(t, "right after the lift", 1, 0, 0)
			f.clock.Advance(controls.Propagation)
			f.decide(t, "A")
			f.expect(t, "after the watch read the lift", 0, 1, 1)
			if st := f.l.watchReport(); st.Identities != 0 {
				t.Fatalf("watch state after the lift: %+v", st)
			}
		})
	}
}

// TestControlWatchReadsOnlyWatchedIdentities: a control on A makes A's
// decisions read its control key and no one else's: B's decisions, alone
// or in one request with A, run the plain script, and Redis runs one GET
// per decision of A (a block: the control key's GET alone) and none for B (INFO commandstats, which counts the
// scripts' commands). A control whose end has passed is read until the
// watch's next read, then no more.
func TestControlWatchReadsOnlyWatchedIdentities(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			f := newWatchFixture(t, client, "watch-only")
			end := f.clock.Now().Add(time.Second)
			if err := f.l.Controls().Set(f.ctx, "A", block(end)); err != nil {
				t.Fatal(err)
			}
			if topo.Name == "single" {
				if err := client.ConfigResetStat(f.ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for range 10 {
				if res := f.decide(t, "B"); res.Control.Kind != controls.None || res.Decisions[0].Limit.Count != 1000 {
					t.Fatalf("B: %+v", res)
				}
			}
			f.expect(t, "10 decisions of B", 0, 10, 1)
			if topo.Name == "single" {
				if n := getCalls(t, client); n != 0 {
					t.Fatalf("10 decisions of B ran %d GETs, want 0", n)
				}
			}
			for range 10 {
				if res := f.decide(t, "A"); res.Control.Kind != controls.Block {
					t.Fatalf("A: %+v", res)
				}
			}
			f.expect(t, "10 decisions of A", 10, 0, 0)
			if topo.Name == "single" {
				if n := getCalls(t, client); n != 10 {
					t.Fatalf("10 decisions of A ran %d GETs, want 10", n)
				}
			}
			// A and B in one request: two slots, both peeked; A's block
			// denies it.
			res := f.decide(t, "A", "B")
			if res.Allowed || res.Control.Kind != controls.Block || !res.Decisions[1].Allowed {
				t.Fatalf("A and B: %+v", res)
			}
			f.expect(t, "A and B in one request", 1, 1, 0)
			// Past the end, before the watch's next read: still read (the
			// record is gone or ended; no control applies).
			f.clock.Set(end.Add(500 * time.Millisecond))
			if res := f.decide(t, "A"); res.Control.Kind != controls.None {
				t.Fatalf("A past its end: %+v", res)
			}
			f.expect(t, "A past its end, before the next read", 1, 0, 0)
			f.clock.Advance(controls.Propagation)
			f.decide(t, "A")
			f.decide(t, "A")
			f.expect(t, "A after the next read", 0, 2, 1)
		})
	}
}

// getCalls is the GETs Redis ran since the last CONFIG RESETSTAT, which
// it then resets.
func getCalls(t *testing.T, client redis.UniversalClient) int64 {
	t.Helper()
	info, err := client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_get:calls="); ok {
			n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// TestControlWatchOverflow: more identity controls than maxWatchedControls
// keep no tag: every decision reads its identity's control key, and the
// watch and the cache say so. Back within the bound, tags again.
func TestControlWatchOverflow(t *testing.T) {
	client := redistest.StartServer(t).Client(t)
	f := newWatchFixture(t, client, "watch-over")
	hash := f.l.keys.networkControlsKey()
	end := strconv.FormatInt(f.clock.Now().Add(time.Hour).UnixMicro(), 10)
	fields := make([]any, 0, 2*(maxWatchedControls+1))
	for i := range maxWatchedControls + 1 {
		fields = append(fields, fmt.Sprintf("i:fake-%04d", i), end)
	}
	if err := client.HSet(f.ctx, hash, fields...).Err(); err != nil {
		t.Fatal(err)
	}
	cache := controls.NewNetworkControlCache(f.l.Controls(), 0)
	nets, err := cache.Get(f.ctx)
	if !errors.Is(err, controls.ErrTooMany) || len(nets) != 0 {
		t.Fatalf("cache past the bound: %+v, %v; want no networks and controls.ErrTooMany", nets, err)
	}
	if st := f.l.watchReport(); !st.Overflow || st.Identities != maxWatchedControls+1 {
		t.Fatalf("watch state %+v, want Overflow with %d identities", st, maxWatchedControls+1)
	}
	f.decide(t, "B")
	f.decide(t, "C")
	f.expect(t, "decisions in overflow", 2, 0, 1)
	// The admin read of the networks says nothing of the identities.
	if nets, err := f.l.Controls().Networks(f.ctx); err != nil || len(nets) != 0 {
		t.Fatalf("NetworkControls in overflow: %+v, %v", nets, err)
	}
	f.hook.counts()
	if err := client.HDel(f.ctx, hash, "i:fake-0000").Err(); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(controls.Propagation)
	f.decide(t, "B")
	f.expect(t, "back within the bound", 0, 1, 1)
	if st := f.l.watchReport(); st.Overflow || st.Identities != maxWatchedControls {
		t.Fatalf("watch state %+v, want %d tags", st, maxWatchedControls)
	}
	if n := f.l.watchReport().Kept; n != maxWatchedControls {
		t.Fatalf("%d tags kept, want %d", n, maxWatchedControls)
	}
}

// TestControlWatchKeepsTheLastListOnAFailedRead: a read that fails (the
// hash replaced by a string: WRONGTYPE) keeps the last list, the decision
// goes on, and the next read is an interval later. Before any read has
// succeeded, every decision reads its control key.
func TestControlWatchKeepsTheLastListOnAFailedRead(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			f := newWatchFixture(t, client, "watch-fail")
			if err := f.l.Controls().Set(f.ctx, "A", block(f.clock.Now().Add(time.Hour))); err != nil {
				t.Fatal(err)
			}
			if res := f.decide(t, "A"); res.Control.Kind != controls.Block {
				t.Fatalf("A: %+v", res)
			}
			f.expect(t, "the first read", 1, 0, 1)
			readAt := f.l.watchReport().ReadAt
			hash := f.l.keys.networkControlsKey()
			if err := client.Del(f.ctx, hash).Err(); err != nil {
				t.Fatal(err)
			}
			if err := client.Set(f.ctx, hash, "not a hash", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(controls.Propagation)
			if res := f.decide(t, "A"); res.Control.Kind != controls.Block {
				t.Fatalf("A after a failed read: %+v, want still blocked", res)
			}
			f.decide(t, "B")
			f.expect(t, "a failed read", 1, 1, 1)
			if st := f.l.watchReport(); !st.ReadAt.Equal(readAt) || st.Identities != 1 {
				t.Fatalf("watch after a failed read: %+v, want the last list, read at %v", st, readAt)
			}
			f.clock.Advance(controls.Propagation - time.Microsecond)
			f.decide(t, "A")
			f.expect(t, "within the interval after a failed read", 1, 0, 0)
			f.clock.Advance(time.Microsecond)
			f.decide(t, "A")
			f.expect(t, "an interval after a failed read", 1, 0, 1)

			// A new Limiter that never read the hash: every decision reads
			// its control key (strictest), retrying the read an interval
			// later.
			fresh := loadedLimiter(t, client, Options{KeyPrefix: "watch-fail", Now: f.clock.Now, Controls: true, Timeout: 5 * time.Second})
			for _, id := range []string{"A", "B"} {
				res, err := fresh.Decide(f.ctx, 1, Check{Identity: id, Limit: watchLimit})
				if err != nil {
					t.Fatal(err)
				}
				if want := id == "A"; res.Control.Kind == controls.Block != want {
					t.Fatalf("%s with no list: %+v", id, res)
				}
			}
			f.expect(t, "a Limiter with no list", 2, 0, 1)
			if st := fresh.watchReport(); st.Loaded {
				t.Fatalf("watch with no good read: %+v", st)
			}
		})
	}
}

// TestControlWatchSharedWithTheCache: a NetworkControlCache and the
// decisions of its Limiter make one read of the hash per interval between
// them; the cache sees a network control and the decisions an identity's
// from that one read.
func TestControlWatchSharedWithTheCache(t *testing.T) {
	client := redistest.StartServer(t).Client(t)
	f := newWatchFixture(t, client, "watch-shared")
	n := netip.MustParsePrefix("198.51.100.0/24")
	if err := f.l.Controls().SetNetwork(f.ctx, n, block(f.clock.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := f.l.Controls().Set(f.ctx, "A", block(f.clock.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	cache := controls.NewNetworkControlCache(f.l.Controls(), 0)
	for round := range 3 {
		if res := f.decide(t, "A"); res.Control.Kind != controls.Block {
			t.Fatalf("round %d: A %+v", round, res)
		}
		nets, err := cache.Get(f.ctx)
		if err != nil || len(nets) != 1 || nets[0].Prefix != n {
			t.Fatalf("round %d: cache %+v, %v", round, nets, err)
		}
		f.decide(t, "B")
		f.expect(t, fmt.Sprint("round ", round), 1, 1, 1)
		f.clock.Advance(controls.Propagation)
	}
}

// TestControlWatchRealClock: on the real clock, a control set on a warm
// instance applies within controls.Propagation plus one request.
func TestControlWatchRealClock(t *testing.T) {
	client := redistest.StartServer(t).Client(t)
	ctx := context.Background()
	l := loadedLimiter(t, client, Options{KeyPrefix: "watch-real", Controls: true, Timeout: 5 * time.Second})
	check := Check{Identity: "A", Limit: watchLimit}
	if res, err := l.Decide(ctx, 1, check); err != nil || !res.Allowed {
		t.Fatalf("warm-up: %+v, %v", res, err)
	}
	set := time.Now()
	if err := l.Controls().Set(ctx, "A", controls.Control{Kind: controls.Block, Until: set.Add(time.Minute), Reason: "abuse"}); err != nil {
		t.Fatal(err)
	}
	for {
		res, err := l.Decide(ctx, 1, check)
		if err != nil {
			t.Fatal(err)
		}
		if res.Control.Kind == controls.Block {
			break
		}
		// Generous: the bound is controls.Propagation plus one request.
		if time.Since(set) > controls.Propagation+3*time.Second {
			t.Fatalf("not blocked %v after Store.Set", time.Since(set))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestControlWatchConcurrentDecisions: concurrent decisions past the
// interval make one read between them, and none waits for it without a
// list: each of a burst on a watched identity is controlled.
func TestControlWatchConcurrentDecisions(t *testing.T) {
	client := redistest.StartServer(t).Client(t)
	f := newWatchFixture(t, client, "watch-conc")
	if err := f.l.Controls().Set(f.ctx, "A", controls.Control{Kind: controls.Exempt, Until: f.clock.Now().Add(time.Hour), Reason: "monitor"}); err != nil {
		t.Fatal(err)
	}
	f.decide(t, "A")
	f.hook.counts()
	for round := range 2 {
		f.clock.Advance(controls.Propagation)
		var wg sync.WaitGroup
		var wrong atomic.Int64
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := f.l.Decide(f.ctx, 1, Check{Identity: "A", Limit: watchLimit})
				if err != nil || res.Control.Kind != controls.Exempt {
					wrong.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := wrong.Load(); n != 0 {
			t.Fatalf("round %d: %d of 50 decisions not exempt", round, n)
		}
		f.expect(t, fmt.Sprint("round ", round), 50, 0, 1)
	}
}

// TestControlWatchOverflowField: Store.Set past maxWatchedControls live
// identity fields writes the one overflow field instead of a field per
// identity, so the hash holds at most maxWatchedControls+1 identity
// fields; every instance reading it is in overflow and applies a control
// set past the bound; the field keeps the latest end (a lift, or an
// earlier end, never brings it back); a freed place takes a new control
// by tag; past the field's end, with the fields left within the bound, an
// instance leaves overflow and still applies the mirrored controls.
func TestControlWatchOverflowField(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			f := newWatchFixture(t, client, "watch-ovf")
			other := loadedLimiter(t, topo.NewClient(t), Options{KeyPrefix: "watch-ovf", Now: f.clock.Now, Controls: true, Timeout: 5 * time.Second})
			hash := f.l.keys.networkControlsKey()
			t0 := f.clock.Now()
			set := func(id string, end time.Time) {
				t.Helper()
				if err := f.l.Controls().Set(f.ctx, id, block(end)); err != nil {
					t.Fatalf("set %s: %v", id, err)
				}
			}
			overflowValue := func() string {
				t.Helper()
				v, err := client.HGet(f.ctx, hash, overflowField).Result()
				if err != nil {
					t.Fatalf("overflow field: %v", err)
				}
				return v
			}
			hlen := func(want int) {
				t.Helper()
				if n, err := client.HLen(f.ctx, hash).Result(); err != nil || n != int64(want) {
					t.Fatalf("the hash holds %d fields (%v), want %d", n, err, want)
				}
			}
			us := func(at time.Time) string { return strconv.FormatInt(at.UnixMicro(), 10) }

			// maxWatchedControls mirrored by tag: 10 end in 30 minutes,
			// the others in 2 hours.
			short, long := t0.Add(30*time.Minute), t0.Add(2*time.Hour)
			for i := range maxWatchedControls {
				end := long
				if i < 10 {
					end = short
				}
				set(fmt.Sprintf("tagged-%04d", i), end)
			}
			hlen(maxWatchedControls)
			// 50 more past the bound, each ending a second before the
			// last: the overflow field holds the first's end.
			overflowEnd := t0.Add(time.Hour)
			for i := range 50 {
				set(fmt.Sprintf("over-%02d", i), overflowEnd.Add(-time.Duration(i)*time.Second))
			}
			hlen(maxWatchedControls + 1)
			if v := overflowValue(); v != us(overflowEnd) {
				t.Fatalf("overflow field %s, want the latest end %s", v, us(overflowEnd))
			}
			for i := range 50 {
				if ok, _ := client.HExists(f.ctx, hash, identityField(f.l.Controls().Tag(fmt.Sprintf("over-%02d", i)))).Result(); ok {
					t.Fatalf("over-%02d has a field of its own", i)
				}
			}
			// A later end extends the field; an earlier one leaves it.
			overflowEnd = t0.Add(90 * time.Minute)
			set("over-late", overflowEnd)
			set("over-early", t0.Add(10*time.Minute))
			hlen(maxWatchedControls + 1)
			if v := overflowValue(); v != us(overflowEnd) {
				t.Fatalf("overflow field %s, want the later end %s", v, us(overflowEnd))
			}

			// Every instance is in overflow: a control set past the bound
			// applies, and a caller with none reads its control key.
			f.hook.counts()
			for name, l := range map[string]*Limiter{"this": f.l, "other": other} {
				for _, id := range []string{"over-49", "over-early", "nobody"} {
					res, err := l.Decide(f.ctx, 1, Check{Identity: id, Limit: watchLimit})
					if err != nil {
						t.Fatal(err)
					}
					if want := id != "nobody"; res.Allowed == want || (res.Control.Kind == controls.Block) != want {
						t.Fatalf("%s instance, %s in overflow: %+v", name, id, res)
					}
				}
				st := l.watchReport()
				if !st.Overflow || st.Identities != maxWatchedControls || !st.OverflowUntil.Equal(overflowEnd) {
					t.Fatalf("%s instance: watch state %+v, want overflow until %v with %d identities", name, st, overflowEnd, maxWatchedControls)
				}
			}
			f.expect(t, "this instance in overflow", 3, 0, 1)

			// Lifting never shortens the overflow field: over-late's end
			// stays in it.
			if _, ok, err := f.l.Controls().Lift(f.ctx, "over-late"); !ok || err != nil {
				t.Fatalf("lift over-late: %v, %v", ok, err)
			}
			if v := overflowValue(); v != us(overflowEnd) {
				t.Fatalf("overflow field after a lift %s, want %s", v, us(overflowEnd))
			}
			// A lifted tagged control frees a place: a new control takes
			// it by tag, the overflow field unchanged.
			if _, ok, err := f.l.Controls().Lift(f.ctx, "tagged-0999"); !ok || err != nil {
				t.Fatalf("lift tagged-0999: %v, %v", ok, err)
			}
			hlen(maxWatchedControls)
			set("late", long)
			hlen(maxWatchedControls + 1)
			if ok, _ := client.HExists(f.ctx, hash, identityField(f.l.Controls().Tag("late"))).Result(); !ok {
				t.Fatal("a control set with a free place has no field of its own")
			}
			if v := overflowValue(); v != us(overflowEnd) {
				t.Fatalf("overflow field after a set by tag %s, want %s", v, us(overflowEnd))
			}

			// An interval before the overflow field's end: still in
			// overflow.
			f.clock.Set(overflowEnd.Add(-controls.Propagation))
			f.hook.counts()
			f.decide(t, "nobody")
			f.expect(t, "just before the overflow's end", 1, 0, 1)
			if st := f.l.watchReport(); !st.Overflow {
				t.Fatalf("watch state %+v before the overflow's end", st)
			}
			// At its end (the next read), 990 tagged fields and late's in force (10 ended,
			// one lifted): out of overflow, the mirrored controls applied.
			f.clock.Set(overflowEnd)
			inForce := maxWatchedControls - 10 - 1 + 1
			for name, l := range map[string]*Limiter{"this": f.l, "other": other} {
				for id, blocked := range map[string]bool{"tagged-0500": true, "late": true, "tagged-0000": false, "over-49": false, "nobody": false} {
					res, err := l.Decide(f.ctx, 1, Check{Identity: id, Limit: watchLimit})
					if err != nil {
						t.Fatal(err)
					}
					if res.Allowed == blocked || (res.Control.Kind == controls.Block) != blocked {
						t.Fatalf("%s instance, %s past the overflow's end: %+v, want blocked %v", name, id, res, blocked)
					}
				}
				if st := l.watchReport(); st.Overflow || st.Identities != inForce || !st.OverflowUntil.IsZero() {
					t.Fatalf("%s instance past the overflow's end: watch state %+v, want %d identities, no overflow", name, st, inForce)
				}
			}
			f.expect(t, "this instance past the overflow's end", 2, 3, 1)
			// The next write prunes the ended fields, the overflow field
			// among them.
			set("after", long)
			hlen(inForce + 1)
			if ok, _ := client.HExists(f.ctx, hash, overflowField).Result(); ok {
				t.Fatal("the ended overflow field outlived a write")
			}
		})
	}
}

// TestControlWatchOverflowFieldConcurrent: concurrent Store.Set calls across
// the bound (the hash's script is atomic) leave at most
// maxWatchedControls+1 identity fields, and every control is either in a
// field of its own or within the overflow field's end, which is the latest
// of theirs: none is missed.
func TestControlWatchOverflowFieldConcurrent(t *testing.T) {
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			f := newWatchFixture(t, client, "watch-ovfc")
			hash := f.l.keys.networkControlsKey()
			t0 := f.clock.Now()
			const before, writers = maxWatchedControls - 10, 40
			fields := make([]any, 0, 2*before)
			for i := range before {
				fields = append(fields, fmt.Sprintf("i:fake-%04d", i), strconv.FormatInt(t0.Add(time.Hour).UnixMicro(), 10))
			}
			if err := client.HSet(f.ctx, hash, fields...).Err(); err != nil {
				t.Fatal(err)
			}
			ends := make([]time.Time, writers)
			errs := make([]error, writers)
			var wg sync.WaitGroup
			for i := range writers {
				ends[i] = t0.Add(time.Hour + time.Duration(i)*time.Second)
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = f.l.Controls().Set(f.ctx, fmt.Sprintf("conc-%02d", i), block(ends[i]))
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			all, err := client.HGetAll(f.ctx, hash).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != maxWatchedControls+1 {
				t.Fatalf("the hash holds %d fields, want %d", len(all), maxWatchedControls+1)
			}
			over, err := strconv.ParseInt(all[overflowField], 10, 64)
			if err != nil {
				t.Fatalf("overflow field %q: %v", all[overflowField], err)
			}
			tagged, latest := 0, int64(0)
			for i := range writers {
				end := ends[i].UnixMicro()
				if v, ok := all[identityField(f.l.Controls().Tag(fmt.Sprintf("conc-%02d", i)))]; ok {
					tagged++
					if v != strconv.FormatInt(end, 10) {
						t.Fatalf("conc-%02d's field %s, want %d", i, v, end)
					}
				} else {
					latest = max(latest, end)
				}
			}
			if over != latest {
				t.Fatalf("overflow field %d, want the latest end of the controls without a field, %d", over, latest)
			}
			if tagged != maxWatchedControls-before {
				t.Fatalf("%d controls took a field of their own, want %d", tagged, maxWatchedControls-before)
			}
		})
	}
}
