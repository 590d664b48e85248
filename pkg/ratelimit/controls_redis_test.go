package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// controlsT0 is the stepped clock's start in these tests.
var controlsT0 = time.Date(2026, 12, 2, 12, 0, 10, 0, time.UTC)

// controlFixture is a Limiter that reads controls and one that does not,
// on the same keys and the same stepped clock.
type controlFixture struct {
	client  redis.UniversalClient
	clock   *testkit.Clock
	limiter *Limiter // Controls: true
	plain   *Limiter // Controls: false
	prefix  string
	ctx     context.Context
}

func newControlFixture(t *testing.T, client redis.UniversalClient, prefix string) *controlFixture {
	t.Helper()
	f := &controlFixture{client: client, clock: testkit.NewClock(controlsT0), prefix: prefix, ctx: context.Background()}
	f.limiter = loadedLimiter(t, client, Options{KeyPrefix: prefix, Now: f.clock.Now, Controls: true})
	f.plain = loadedLimiter(t, client, Options{KeyPrefix: prefix, Now: f.clock.Now})
	return f
}

func loadedLimiter(t testing.TB, client redis.UniversalClient, opts Options) *Limiter {
	t.Helper()
	l, err := NewLimiter(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	return l
}

// set stores a control for identity as the admin API does: the record,
// kept by Redis for ttl (real time; the decision reads its end on the
// stepped clock).
func (f *controlFixture) set(t *testing.T, identity string, c controls.Control, ttl time.Duration) {
	t.Helper()
	f.setRaw(t, identity, formatControlRecord(c), ttl)
}

func (f *controlFixture) setRaw(t *testing.T, identity, record string, ttl time.Duration) {
	t.Helper()
	key := f.limiter.keys.controlKey(f.limiter.keys.identityTag(identity))
	if err := f.client.Set(f.ctx, key, record, ttl).Err(); err != nil {
		t.Fatal(err)
	}
	watchIdentity(t, f.client, f.limiter, identity)
}

// watchIdentity lists identity in l's network-controls hash, with no end,
// as Store.Set does, and makes l's watch read the hash at its next
// decision, as it would controls.Propagation later.
func watchIdentity(t testing.TB, client redis.UniversalClient, l *Limiter, identity string) {
	t.Helper()
	field := identityField(l.keys.identityTag(identity))
	if err := client.HSet(context.Background(), l.keys.networkControlsKey(), field, "9999999999999999").Err(); err != nil {
		t.Fatal(err)
	}
	l.watch.Invalidate()
}

func (f *controlFixture) lift(t *testing.T, identity string) {
	t.Helper()
	if err := f.client.Del(f.ctx, f.limiter.keys.controlKey(f.limiter.keys.identityTag(identity))).Err(); err != nil {
		t.Fatal(err)
	}
}

func (f *controlFixture) decide(t *testing.T, checks ...Check) Result {
	t.Helper()
	res, err := f.limiter.Decide(f.ctx, 1, checks...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// state is what the plain limiter's peek says of checks: the counts,
// exactly, with no control read.
func (f *controlFixture) state(t *testing.T, checks ...Check) []Decision {
	t.Helper()
	res, err := f.plain.peek(f.ctx, 1, checks...)
	if err != nil {
		t.Fatal(err)
	}
	return res.Decisions
}

func burstOf(a Algorithm, count int64) int64 {
	if a == LeakyBucket {
		return 1
	}
	return count
}

func block(until time.Time) controls.Control {
	return controls.Control{Kind: controls.Block, Until: until, Reason: "abuse", SetBy: "ops", SetAt: controlsT0}
}

// TestLiveControls pins down every control's answer on a single node and a
// cluster, for every algorithm, with exact counts.
func TestLiveControls(t *testing.T) {
	t.Parallel() // its own servers: the cluster's start-up waits beside other tests'
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			t.Run("block", func(t *testing.T) { testControlBlock(t, client) })
			t.Run("exempt", func(t *testing.T) { testControlExempt(t, client) })
			t.Run("scale x10 then lifted", func(t *testing.T) { testControlScaleUp(t, client) })
			t.Run("scale x0.1", func(t *testing.T) { testControlScaleDown(t, client) })
			t.Run("mixed algorithms of one identity", func(t *testing.T) { testControlMixed(t, client) })
			t.Run("several identities", func(t *testing.T) { testControlSeveralIdentities(t, client) })
			t.Run("malformed records change nothing", func(t *testing.T) { testControlMalformed(t, client) })
			t.Run("off ignores records", func(t *testing.T) { testControlsOff(t, client) })
			t.Run("concurrent under a scale", func(t *testing.T) { testControlConcurrent(t, client) })
			t.Run("script flush", func(t *testing.T) { testControlScriptFlush(t, client, topo.Masters(t)) })
			t.Run("real expiry", func(t *testing.T) { testControlRealExpiry(t, client) })
			t.Run("through the admin API", func(t *testing.T) { testControlThroughAdminAPI(t, client) })
		})
	}
}

func testControlBlock(t *testing.T, client redis.UniversalClient) {
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "ctl-block")
			id := "blocked-" + string(alg)
			check := Check{Identity: id, Limit: Limit{Name: "user", Count: 5, Window: time.Minute, Algorithm: alg}}
			if res := f.decide(t, check); !res.Allowed || res.Control.Kind != controls.None {
				t.Fatalf("before the block: %+v", res)
			}
			before := f.state(t, check)
			until := controlsT0.Add(10 * time.Minute)
			f.set(t, id, block(until), time.Hour)
			for range 3 {
				f.clock.Advance(time.Second)
				res := f.decide(t, check)
				wait := until.Sub(f.clock.Now())
				d := res.Decisions[0]
				if res.Allowed || d.Allowed || d.Remaining != 0 || d.RetryAfter != wait || d.ResetAfter != wait || d.Limit != check.Limit {
					t.Fatalf("blocked: %+v, want denied, 0 remaining, retry and reset after %v", res, wait)
				}
				if res.Control.Kind != controls.Block || !res.Control.Until.Equal(until) || res.Control.Malformed {
					t.Fatalf("blocked: controls.Control = %+v", res.Control)
				}
				peek, err := f.limiter.peek(f.ctx, 1, check)
				if err != nil || peek.Allowed || peek.Control.Kind != controls.Block {
					t.Fatalf("Peek while blocked: %+v, %v", peek, err)
				}
			}
			// Nothing was spent: the counts are those of one second after
			// the spend, exactly what they would be with no traffic.
			f.clock.Set(controlsT0)
			if after := f.state(t, check); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("the block spent: state %+v, was %+v", after, before)
			}
			f.clock.Set(until.Add(-time.Microsecond))
			if res := f.decide(t, check); res.Allowed || res.Decisions[0].RetryAfter != time.Microsecond {
				t.Fatalf("1µs before the end: %+v", res)
			}
			f.clock.Set(until)
			if res := f.decide(t, check); !res.Allowed || res.Control.Kind != controls.None {
				t.Fatalf("at the end: %+v, want admitted with no control", res)
			}
		})
	}
}

func testControlExempt(t *testing.T, client redis.UniversalClient) {
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "ctl-exempt")
			id := "2001:db8::/64-" + string(alg)
			check := Check{Identity: id, Limit: Limit{Name: "ip", Count: 3, Window: time.Minute, Algorithm: alg}}
			f.decide(t, check)
			before := f.state(t, check)
			until := controlsT0.Add(time.Hour)
			f.set(t, id, controls.Control{Kind: controls.Exempt, Until: until, Reason: "monitor"}, time.Hour)
			for range 20 {
				res := f.decide(t, check)
				d := res.Decisions[0]
				if !res.Allowed || !d.Allowed || d.RetryAfter != 0 || res.Control.Kind != controls.Exempt || !res.Control.Until.Equal(until) {
					t.Fatalf("exempt: %+v", res)
				}
				if d.Remaining != before[0].Remaining || d.ResetAfter != before[0].ResetAfter {
					t.Fatalf("exempt decision: remaining %d reset %v, want the honest %d and %v", d.Remaining, d.ResetAfter, before[0].Remaining, before[0].ResetAfter)
				}
			}
			if after := f.state(t, check); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("exempt spent: state %+v, was %+v", after, before)
			}
			f.lift(t, id)
			admitted := int64(0)
			for range 10 {
				if f.decide(t, check).Allowed {
					admitted++
				}
			}
			if want := burstOf(alg, 3) - 1; admitted != want {
				t.Fatalf("after the exemption: admitted %d, want the %d left", admitted, want)
			}
		})
	}
}

// admitBurst spends one unit at a time at one instant until a denial and
// returns how many were admitted and the denial.
func admitBurst(t *testing.T, f *controlFixture, checks ...Check) (int64, Result) {
	t.Helper()
	for n := int64(0); n < 10_000; n++ {
		res := f.decide(t, checks...)
		if !res.Allowed {
			return n, res
		}
	}
	t.Fatal("no denial in 10,000 requests")
	return 0, Result{}
}

func scale(factor float64) controls.Control {
	return controls.Control{Kind: controls.Scale, Factor: factor, Until: controlsT0.Add(time.Hour), Reason: "launch"}
}

func testControlScaleUp(t *testing.T, client redis.UniversalClient) {
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "ctl-up")
			id := "launch-" + string(alg)
			check := Check{Identity: id, Limit: Limit{Name: "plan", Count: 3, Window: time.Minute, Algorithm: alg}}
			if alg != LeakyBucket {
				f.decide(t, check) // a unit spent before the scale, in the configured layout
			}
			f.set(t, id, scale(10), time.Hour)
			// A peek under the scale answers with the scaled limit and
			// leaves the keys byte for byte as they were.
			key := f.limiter.keys.key(f.limiter.keys.identityTag(id), check.Limit)
			dump := func() string { v, _ := f.client.Dump(f.ctx, key).Result(); return v }
			before := dump()
			left := int64(29) // of 30, one spent before the scale
			if alg == LeakyBucket {
				left = 1
			}
			peek, err := f.limiter.peek(f.ctx, 1, check)
			if err != nil || !peek.Allowed || peek.Control.Kind != controls.Scale || peek.Decisions[0].Limit.Count != 30 || peek.Decisions[0].Remaining != left {
				t.Fatalf("Peek under x10: %+v, %v", peek, err)
			}
			if after := dump(); after != before {
				t.Fatalf("Peek under a scale rewrote the key: %q, was %q", after, before)
			}
			n, denial := admitBurst(t, f, check)
			want := int64(30) - 1
			if alg == LeakyBucket {
				want = 1
			}
			if n != want {
				t.Fatalf("x10 admitted %d at one instant, want %d", n, want)
			}
			d := denial.Decisions[0]
			if d.Limit.Count != 30 || denial.Control.Kind != controls.Scale || denial.Control.Factor != 10 {
				t.Fatalf("scaled denial: limit %v, control %+v", d.Limit, denial.Control)
			}
			if alg == LeakyBucket {
				// Ten times the rate: one every 2s, not every 20s.
				for range 5 {
					f.clock.Advance(2*time.Second - time.Microsecond)
					if f.decide(t, check).Allowed {
						t.Fatal("leaky bucket x10 admitted before its interval of 2s")
					}
					f.clock.Advance(time.Microsecond)
					if res := f.decide(t, check); !res.Allowed {
						t.Fatalf("leaky bucket x10 denied at its interval: %+v", res)
					}
				}
			}
			// Lifted: the caller is where its counts say, denied until the
			// configured limit admits it again, to the microsecond.
			f.lift(t, id)
			res := f.decide(t, check)
			if res.Allowed || res.Control.Kind != controls.None || res.Decisions[0].Limit.Count != 3 {
				t.Fatalf("after lifting x10: %+v, want a denial by the configured limit", res)
			}
			wait := res.RetryAfter()
			f.clock.Advance(wait - time.Microsecond)
			if res := f.decide(t, check); res.Allowed {
				t.Fatalf("admitted 1µs before the Retry-After %v", wait)
			}
			f.clock.Advance(time.Microsecond)
			if res := f.decide(t, check); !res.Allowed {
				t.Fatalf("denied at the Retry-After %v: %+v", wait, res)
			}
		})
	}
}

func testControlScaleDown(t *testing.T, client redis.UniversalClient) {
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "ctl-down")
			id := "suspect-" + string(alg)
			check := Check{Identity: id, Limit: Limit{Name: "plan", Count: 35, Window: time.Minute, Algorithm: alg}}
			f.set(t, id, scale(0.1), time.Hour)
			n, denial := admitBurst(t, f, check)
			if want := burstOf(alg, 3); n != want {
				t.Fatalf("x0.1 of 35 admitted %d at one instant, want floor(3.5) = %d", n, want)
			}
			if denial.Decisions[0].Limit.Count != 3 || denial.Decisions[0].Remaining != 0 {
				t.Fatalf("x0.1 denial: %+v", denial.Decisions[0])
			}
			// A cost the scaled limit can never admit waits for the end.
			if alg != LeakyBucket {
				res, err := f.limiter.Decide(f.ctx, 4, check)
				if err != nil || res.Allowed || res.RetryAfter() != time.Hour {
					t.Fatalf("cost 4 under a scaled limit of 3: %+v, %v; want denied until the scale ends", res, err)
				}
			}
		})
	}
	// A shadow limit is scaled too, and still denies nothing.
	t.Run("shadow", func(t *testing.T) {
		f := newControlFixture(t, client, "ctl-shadow")
		enforced := Check{Identity: "shadowed", Limit: Limit{Name: "plan", Count: 3, Window: time.Minute}}
		shadow := Check{Identity: "shadowed", Limit: Limit{Name: "next-plan", Count: 2, Window: time.Minute, Algorithm: TokenBucket}, Shadow: true}
		f.set(t, "shadowed", scale(10), time.Hour)
		n, denial := admitBurst(t, f, enforced, shadow)
		if n != 30 || denial.Decisions[1].Limit.Count != 20 || !denial.Decisions[1].Shadow || denial.Decisions[1].Allowed {
			t.Fatalf("x10 with a shadow limit: admitted %d, shadow decision %+v", n, denial.Decisions[1])
		}
		if d := f.state(t, shadow)[0]; d.Remaining != 0 {
			t.Fatalf("the shadow bucket after 20 of its 20: %+v", d)
		}
	})
	// Counts spent before a scale down are carried into the scaled layout.
	for _, alg := range []Algorithm{SlidingWindow, FixedWindow} {
		t.Run("carried/"+string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "ctl-carry")
			id := "carry-" + string(alg)
			check := Check{Identity: id, Limit: Limit{Name: "plan", Count: 40, Window: time.Minute, Algorithm: alg}}
			f.decide(t, check)
			f.decide(t, check)
			f.set(t, id, scale(0.1), time.Hour)
			if n, _ := admitBurst(t, f, check); n != 2 {
				t.Fatalf("2 spent of 40, then x0.1: admitted %d more, want 2 of 4", n)
			}
			// And lifted, the 4 spent count against the 40.
			f.lift(t, id)
			if d := f.state(t, check)[0]; d.Remaining != 36 {
				t.Fatalf("lifted: %d remaining, want 36", d.Remaining)
			}
		})
	}
}

func testControlMixed(t *testing.T, client redis.UniversalClient) {
	f := newControlFixture(t, client, "ctl-mixed")
	checks := func(id string) []Check {
		return []Check{
			{Identity: id, Limit: Limit{Name: "user", Count: 6, Window: time.Minute}},
			{Identity: id, Limit: Limit{Name: "POST /auth/*", Count: 2, Window: time.Minute, Algorithm: SlidingLog}},
			{Identity: id, Limit: Limit{Name: "burst", Count: 3, Window: time.Second, Algorithm: TokenBucket}},
		}
	}
	t.Run("block", func(t *testing.T) {
		cs := checks("mixed-block")
		f.set(t, "mixed-block", block(controlsT0.Add(time.Minute)), time.Hour)
		res := f.decide(t, cs...)
		if res.Allowed || res.Control.Kind != controls.Block {
			t.Fatalf("%+v", res)
		}
		for _, d := range res.Decisions {
			if d.Allowed || d.RetryAfter != time.Minute {
				t.Fatalf("%+v", d)
			}
		}
		for _, d := range f.state(t, cs...) {
			if d.Remaining != burstOf(d.Limit.Algorithm, d.Limit.Count) {
				t.Fatalf("blocked mixed request spent: %+v", d)
			}
		}
	})
	t.Run("exempt", func(t *testing.T) {
		cs := checks("mixed-exempt")
		f.set(t, "mixed-exempt", controls.Control{Kind: controls.Exempt, Until: controlsT0.Add(time.Minute), Reason: "partner"}, time.Hour)
		for range 5 {
			if res := f.decide(t, cs...); !res.Allowed || res.Control.Kind != controls.Exempt {
				t.Fatalf("%+v", res)
			}
		}
		for _, d := range f.state(t, cs...) {
			if d.Remaining != d.Limit.Count {
				t.Fatalf("exempt mixed request spent: %+v", d)
			}
		}
	})
	t.Run("scale", func(t *testing.T) {
		cs := checks("mixed-scale")
		f.set(t, "mixed-scale", scale(10), time.Hour)
		// The route's 2 x10 = 20 is the tightest of 60, 20 and 30.
		n, denial := admitBurst(t, f, cs...)
		if n != 20 {
			t.Fatalf("x10 admitted %d through tier+route+burst, want the route's 20", n)
		}
		if got := []int64{denial.Decisions[0].Limit.Count, denial.Decisions[1].Limit.Count, denial.Decisions[2].Limit.Count}; fmt.Sprint(got) != "[60 20 30]" {
			t.Fatalf("scaled counts %v", got)
		}
		f.lift(t, "mixed-scale")
		st := f.state(t, cs...)
		if st[0].Remaining != 0 || st[1].Remaining != 0 || st[2].Remaining != 0 {
			t.Fatalf("lifted: %+v, want all three spent out", st)
		}
	})
}

func testControlSeveralIdentities(t *testing.T, client redis.UniversalClient) {
	f := newControlFixture(t, client, "ctl-multi")
	ip := func(id string) Check {
		return Check{Identity: id, Limit: Limit{Name: "ip", Count: 5, Window: time.Minute}}
	}
	key := func(id string) Check {
		return Check{Identity: id, Limit: Limit{Name: "key", Count: 5, Window: time.Minute, Algorithm: TokenBucket}}
	}
	f.set(t, "blocked-ip", block(controlsT0.Add(time.Minute)), time.Hour)
	res := f.decide(t, ip("blocked-ip"), key("key-a"))
	if res.Allowed || res.Control.Kind != controls.Block || res.Decisions[0].Allowed || !res.Decisions[1].Allowed {
		t.Fatalf("a blocked IP with a key: %+v", res)
	}
	if d := f.state(t, key("key-a"))[0]; d.Remaining != 5 {
		t.Fatalf("a request denied by a block spent on the key: %+v", d)
	}
	f.set(t, "exempt-ip", controls.Control{Kind: controls.Exempt, Until: controlsT0.Add(time.Minute), Reason: "monitor"}, time.Hour)
	for range 3 {
		if res := f.decide(t, ip("exempt-ip"), key("key-b")); !res.Allowed || res.Control.Kind != controls.Exempt {
			t.Fatalf("an exempt IP with a key: %+v", res)
		}
	}
	if ipd, kd := f.state(t, ip("exempt-ip"))[0], f.state(t, key("key-b"))[0]; ipd.Remaining != 5 || kd.Remaining != 2 {
		t.Fatalf("exempt IP's own check spent %d, the key %d; want 0 and 3", 5-ipd.Remaining, 5-kd.Remaining)
	}
	// The key's own control applies to the key's check only; a block
	// outranks an exemption in Result.Control.
	f.set(t, "key-b", block(controlsT0.Add(time.Minute)), time.Hour)
	if res := f.decide(t, ip("exempt-ip"), key("key-b")); res.Allowed || res.Control.Kind != controls.Block {
		t.Fatalf("exempt IP with a blocked key: %+v", res)
	}
}

// malformedRecords are records parseControlRecord refuses; the scripts
// must ignore each of them.
var malformedRecords = []string{
	"",
	"garbage",
	"v2 b 1900000000000000 0 {}",
	"v1 x 1900000000000000 0 {}",
	"v1 b  1900000000000000 0 {}",
	"v1 b 1900000000000000 0",
	"v1 b 19000000000000000 0 {}",
	"v1 b -1 0 {}",
	"v1 s 1900000000000000 0 {}",
	"v1 s 1900000000000000 1000001 {}",
	"v1 e 1900000000000000 0 not json",
	"v1 e 1900000000000000 0 {\"reason\":5}",
	"v1 e 1900000000000000 0 {\"at\":1.5}",
	"v1 e 1900000000000000 0 [1]",
	"v1 e 1900000000000000 0 []",
	"v1 e 1900000000000000 0 7",
	"v1 e 1900000000000000 0 \"x\"",
	"v1 e 1900000000000000 0 {\"reason\":\"x\"",
}

func testControlMalformed(t *testing.T, client redis.UniversalClient) {
	for _, rec := range malformedRecords {
		if _, err := parseControlRecord(rec); err == nil {
			t.Fatalf("parseControlRecord accepts %q, which this test calls malformed", rec)
		}
	}
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "ctl-bad")
			for i, rec := range malformedRecords {
				bad, clean := fmt.Sprintf("bad-%s-%d", alg, i), fmt.Sprintf("clean-%s-%d", alg, i)
				f.setRaw(t, bad, rec, time.Hour)
				for range 7 {
					rb := f.decide(t, Check{Identity: bad, Limit: Limit{Name: "u", Count: 4, Window: time.Minute, Algorithm: alg}})
					rc := f.decide(t, Check{Identity: clean, Limit: Limit{Name: "u", Count: 4, Window: time.Minute, Algorithm: alg}})
					if !rb.Control.Malformed || rb.Control.Kind != controls.None || rc.Control != (controls.Applied{}) {
						t.Fatalf("record %q: controls %+v and %+v", rec, rb.Control, rc.Control)
					}
					if rb.Allowed != rc.Allowed || fmt.Sprint(rb.Decisions) != fmt.Sprint(rc.Decisions) {
						t.Fatalf("record %q changed the decision: %+v, without it %+v", rec, rb, rc)
					}
					f.clock.Advance(3 * time.Second)
				}
			}
		})
	}
	// A record whose end has passed is silently ignored.
	f := newControlFixture(t, client, "ctl-ended")
	f.set(t, "ended", block(controlsT0), time.Hour)
	if res := f.decide(t, Check{Identity: "ended", Limit: Limit{Name: "u", Count: 1, Window: time.Minute}}); !res.Allowed || res.Control != (controls.Applied{}) {
		t.Fatalf("ended block: %+v", res)
	}
}

// TestControlRecordsAgreeWithTheScripts runs parseControlRecord and the
// scripts over the same records: what one refuses, the other ignores.
func TestControlRecordsAgreeWithTheScripts(t *testing.T) {
	f := newControlFixture(t, redistest.StartServer(t).Client(t), "ctl-agree")
	good := []string{
		formatControlRecord(block(controlsT0.Add(time.Hour))),
		"v1 b 1900000000000000 0 {}",
		"v1 b 1900000000000000 7 null",
		"v1 e 1900000000000000 0 {\"reason\":\"a b c\",\"by\":null,\"at\":12}",
		"v1 s 1900000000000000 1 {\"unknown\":[1,2]}",
		"v1 s 1900000000000000 1000000 {}",
		"v1 b 1900000000000000 0 {\"reason\":\"two\\nlines\"}",
	}
	for i, rec := range append(good, malformedRecords...) {
		_, err := parseControlRecord(rec)
		id := fmt.Sprint("agree-", i)
		f.setRaw(t, id, rec, time.Hour)
		res := f.decide(t, Check{Identity: id, Limit: Limit{Name: "u", Count: 1, Window: time.Minute}})
		if res.Control.Malformed != (err != nil) {
			t.Errorf("record %q: parseControlRecord says %v, the script's Malformed %v", rec, err, res.Control.Malformed)
		}
	}
}

func testControlsOff(t *testing.T, client redis.UniversalClient) {
	f := newControlFixture(t, client, "ctl-off")
	check := Check{Identity: "off", Limit: Limit{Name: "u", Count: 2, Window: time.Minute}}
	f.set(t, "off", block(controlsT0.Add(time.Hour)), time.Hour)
	for i, want := range []bool{true, true, false} {
		res, err := f.plain.Decide(f.ctx, 1, check)
		if err != nil || res.Allowed != want || res.Control != (controls.Applied{}) {
			t.Fatalf("request %d without Controls: %+v, %v; want allowed=%v and no control", i, res, err, want)
		}
	}
}

func testControlConcurrent(t *testing.T, client redis.UniversalClient) {
	redistest.WarmPool(t, client, 16)
	for _, alg := range Algorithms() {
		if alg == LeakyBucket {
			continue // admits one at an instant
		}
		t.Run(string(alg), func(t *testing.T) {
			f := newControlFixture(t, client, "ctl-race")
			id := "race-" + string(alg)
			check := Check{Identity: id, Limit: Limit{Name: "u", Count: 7, Window: time.Minute, Algorithm: alg}}
			f.set(t, id, scale(3), time.Hour)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						res, err := f.limiter.Decide(f.ctx, 1, check)
						if err != nil {
							errs <- err
							return
						}
						if res.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := admitted.Load(); got != 21 {
				t.Fatalf("80 concurrent requests under 7 x3: admitted %d, want 21", got)
			}
		})
	}
}

func testControlScriptFlush(t *testing.T, client redis.UniversalClient, masters []*redis.Client) {
	f := newControlFixture(t, client, "ctl-flush")
	tier := Check{Identity: "flush", Limit: Limit{Name: "u", Count: 4, Window: time.Minute}}
	route := Check{Identity: "flush", Limit: Limit{Name: "r", Count: 10, Window: time.Minute, Algorithm: SlidingLog}}
	f.set(t, "flush", scale(2), time.Hour)
	admitted := 0
	for i := range 12 {
		if i%3 == 1 {
			for _, m := range masters {
				if err := m.ScriptFlush(f.ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		res, err := f.limiter.Decide(f.ctx, 1, tier, route)
		if err != nil {
			t.Fatalf("request %d after SCRIPT FLUSH: %v", i, err)
		}
		if res.Allowed {
			admitted++
		}
	}
	if admitted != 8 {
		t.Fatalf("admitted %d through SCRIPT FLUSHes under x2 of 4, want 8", admitted)
	}
}

func testControlRealExpiry(t *testing.T, client redis.UniversalClient) {
	l := loadedLimiter(t, client, Options{KeyPrefix: "ctl-ttl", Controls: true})
	ctx := context.Background()
	check := Check{Identity: "ttl", Limit: Limit{Name: "u", Count: 100, Window: time.Minute}}
	until := time.Now().Add(1500 * time.Millisecond)
	key := l.keys.controlKey(l.keys.identityTag("ttl"))
	c := block(until)
	c.SetAt = time.Now()
	if err := client.SetArgs(ctx, key, formatControlRecord(c), redis.SetArgs{ExpireAt: until}).Err(); err != nil {
		t.Fatal(err)
	}
	watchIdentity(t, client, l, "ttl")
	res, err := l.Decide(ctx, 1, check)
	if err != nil || res.Allowed || res.Control.Kind != controls.Block {
		t.Fatalf("blocked: %+v, %v", res, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := l.Decide(ctx, 1, check)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			if time.Now().Before(until) {
				t.Fatalf("admitted before the block's end %v", until)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still blocked 15s after the end: %+v", res)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Redis forgot it: nobody cleaned up.
	time.Sleep(100 * time.Millisecond)
	if n, err := client.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("the ended control's key is still there (%d, %v)", n, err)
	}
}

// TestDenyCacheHoldsNoDenialPastControlPropagation: with controls read, a
// lifted block reaches a warm Gate within controls.Propagation on its clock.
func TestDenyCacheHoldsNoDenialPastControlPropagation(t *testing.T) {
	client := redistest.StartServer(t).Client(t)
	for _, withControls := range []bool{true, false} {
		t.Run(fmt.Sprint("controls=", withControls), func(t *testing.T) {
			f := newControlFixture(t, client, fmt.Sprint("ctl-deny-", withControls))
			gate := NewGate(f.limiter, GateOptions{})
			hold := time.Minute // the whole wait of the limit's denial
			if withControls {
				hold = controls.Propagation
			} else {
				gate = NewGate(f.plain, GateOptions{})
			}
			check := Check{Identity: "cached", Limit: Limit{Name: "u", Count: 1, Window: time.Minute, Algorithm: FixedWindow}}
			f.clock.Set(controlsT0.Truncate(time.Minute))
			if res, _ := gate.Decide(f.ctx, 1, FailOpen, check); !res.Allowed {
				t.Fatal("first request denied")
			}
			res, _ := gate.Decide(f.ctx, 1, FailOpen, check)
			if res.Allowed || res.RetryAfter() != time.Minute {
				t.Fatalf("second request: %+v, want denied for the minute", res)
			}
			calls := gate.stats().redisCalls
			f.clock.Advance(hold - time.Microsecond)
			if res, _ := gate.Decide(f.ctx, 1, FailOpen, check); res.Allowed || gate.stats().redisCalls != calls {
				t.Fatalf("within the hold: allowed=%v, Redis asked %d times; want a cached denial", res.Allowed, gate.stats().redisCalls-calls)
			}
			f.clock.Advance(time.Microsecond)
			gate.Decide(f.ctx, 1, FailOpen, check)
			if got := gate.stats().redisCalls - calls; got != 1 {
				t.Fatalf("at the hold's end (%v): Redis asked %d times, want 1", hold, got)
			}
		})
	}
	t.Run("a lifted block", func(t *testing.T) {
		f := newControlFixture(t, client, "ctl-deny-lift")
		gate := NewGate(f.limiter, GateOptions{})
		check := Check{Identity: "lifted", Limit: Limit{Name: "u", Count: 10, Window: time.Minute}}
		f.set(t, "lifted", block(controlsT0.Add(time.Hour)), time.Hour)
		if res, _ := gate.Decide(f.ctx, 1, FailOpen, check); res.Allowed || res.Control.Kind != controls.Block {
			t.Fatalf("blocked: %+v", res)
		}
		f.lift(t, "lifted")
		f.clock.Advance(controls.Propagation - time.Microsecond)
		res, _ := gate.Decide(f.ctx, 1, FailOpen, check)
		if res.Allowed || res.Control.Kind != controls.Block || res.RetryAfter() != time.Hour-controls.Propagation+time.Microsecond {
			t.Fatalf("cached block: %+v", res)
		}
		f.clock.Advance(time.Microsecond)
		if res, _ := gate.Decide(f.ctx, 1, FailOpen, check); !res.Allowed || res.Control.Kind != controls.None {
			t.Fatalf("%v after the lift: %+v, want admitted", controls.Propagation, res)
		}
	})
}

// testControlThroughAdminAPI sets and lifts controls with Store.Set and
// Store.Lift, on a stepped clock near the real one
// (the record's TTL is real time), and decides on them. The Limiter's
// first decision reads its control watch, which then lists the identity:
// the lift and the second control apply from the next decision (a new
// control on a warm Limiter waits for the watch's next read:
// TestControlWatchAppliesANewControlAfterItsRead).
func testControlThroughAdminAPI(t *testing.T, client redis.UniversalClient) {
	clock := testkit.NewClock(time.Now().Truncate(time.Minute))
	l := loadedLimiter(t, client, Options{KeyPrefix: "ctl-admin", Controls: true, Now: clock.Now})
	ctx := context.Background()
	check := Check{Identity: "api-key-1", Limit: Limit{Name: "key", Count: 3, Window: time.Minute}}
	if err := l.Controls().Set(ctx, check.Identity, controls.Control{Kind: controls.Block, Until: clock.Now().Add(time.Hour), Reason: "abuse", SetBy: "ops"}); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Decide(ctx, 1, check); err != nil || res.Allowed || res.Control.Kind != controls.Block {
		t.Fatalf("after Store.Set(block): %+v, %v", res, err)
	}
	if _, ok, err := l.Controls().Lift(ctx, check.Identity); err != nil || !ok {
		t.Fatalf("Store.Lift: %v, %v", ok, err)
	}
	if err := l.Controls().Set(ctx, check.Identity, controls.Control{Kind: controls.Scale, Factor: 10, Until: clock.Now().Add(time.Hour), Reason: "launch"}); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 40 {
		res, err := l.Decide(ctx, 1, check)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed {
			admitted++
		}
	}
	if admitted != 30 {
		t.Fatalf("Store.Set(scale x10) of 3: admitted %d, want 30", admitted)
	}
	if _, _, err := l.Controls().Lift(ctx, check.Identity); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Decide(ctx, 1, check); err != nil || res.Allowed || res.Control.Kind != controls.None || res.Decisions[0].Limit.Count != 3 {
		t.Fatalf("lifted after 30 of x10: %+v, %v; want denied by the configured 3", res, err)
	}
}
