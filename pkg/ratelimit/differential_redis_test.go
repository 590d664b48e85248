package ratelimit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// TestDecisionsMatchTheReference holds the one-script decision to the
// reference model (reference_model_test.go) over random sequences of one
// identity's requests: a random few of seven limits (every algorithm, one
// twice) in random order, some of them shadows, costs, peeks, counts
// changed between requests, and block, exempt and scale controls set,
// changed, lifted and ended; decided by a Limiter that reads controls and
// by one that does not, on the same keys, so that every script runs: each
// algorithm's alone, mixed.lua, and the controlled one. Most requests ask
// the last one's limits again, and a denied one is asked again at its
// RetryAfter or a microsecond before it. Every answer is compared whole:
// admitted or denied, each limit's Remaining, ResetAfter and RetryAfter to
// the microsecond, the time and the control applied.
//
// Time runs two ways. On a stepped clock (Options.Now), steps stay put,
// move a little, land on window and bucket edges, or pass whole windows.
// On Redis's clock (TIME, as in production), the reference decides at the
// time each reply reports; a run lasts milliseconds, so that half holds
// the production clock's path, the stepped half the passage of time.
// Windows are an hour or more so
// that no key expires on Redis's own clock during a run: a stepped clock
// runs ahead of it (fixed windows, whose keys expire at their window's
// end, keep the stepped clock out of their last minute).
//
// A failure prints its seed and the steps up to it; DIFF_SEED=n runs seed
// n alone, DIFF_STEPS=n sets the number of steps.
func TestDecisionsMatchTheReference(t *testing.T) {
	seeds, steps := []uint64{1, 2, 3, 4, 5, 6, 7, 8}, 500
	if s, err := strconv.ParseUint(os.Getenv("DIFF_SEED"), 10, 64); err == nil {
		seeds = []uint64{s}
	}
	if n, err := strconv.Atoi(os.Getenv("DIFF_STEPS")); err == nil {
		steps = n
	}
	for _, topo := range redistest.StartTopologies(t) {
		t.Run(topo.Name, func(t *testing.T) {
			client := topo.NewClient(t)
			for _, seed := range seeds {
				for _, stepped := range []bool{true, false} {
					name := fmt.Sprintf("seed %d/%s clock", seed, map[bool]string{true: "stepped", false: "Redis"}[stepped])
					t.Run(name, func(t *testing.T) { runDifferential(t, client, seed, stepped, steps) })
				}
			}
		})
	}
}

// differential is one run: the two Limiters, the model, and the story so
// far for a failure message.
type differential struct {
	t       *testing.T
	ctx     context.Context
	client  redis.UniversalClient
	rng     *rand.Rand
	clock   *testkit.Clock // nil on Redis's clock
	now     int64          // the last decision's time, Unix µs
	ctl     *Limiter       // Options.Controls
	plain   *Limiter
	model   *refModel
	control refControl
	limits  []Limit
	seed    uint64
	log     []string
	retries []int64 // the last answer's RetryAfters, µs; never empty
	seen    map[string]int
	// picked and cost are the last request's; again asks it once more,
	// as a client does after a denial's RetryAfter.
	picked []pick
	cost   int64
	again  bool
}

const diffIdentity = "caller"

// pick is one check of a request: a limit, by index, and whether it is a
// shadow.
type pick struct {
	limit  int
	shadow bool
}

func runDifferential(t *testing.T, client redis.UniversalClient, seed uint64, stepped bool, steps int) {
	rng := rand.New(rand.NewPCG(seed, 38))
	d := &differential{t: t, ctx: context.Background(), client: client, rng: rng, model: newRefModel(), seed: seed, seen: map[string]int{}}
	opts := Options{KeyPrefix: fmt.Sprintf("diff%d%t", seed, stepped)}
	if stepped {
		d.clock = testkit.NewClock(controlsT0.Add(time.Duration(rng.Int64N(int64(time.Hour)/1000)) * time.Microsecond))
		opts.Now = d.clock.Now
		d.now = d.clock.Now().UnixMicro()
	} else {
		tm, err := client.Time(d.ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		d.now = tm.UnixMicro()
	}
	d.plain = loadedLimiter(t, client, opts)
	opts.Controls = true
	d.ctl = loadedLimiter(t, client, opts)
	algs := Algorithms()
	algs = append(algs, algs[rng.IntN(len(algs))])
	windows := []time.Duration{time.Hour, 90 * time.Minute, 2 * time.Hour, 61 * time.Minute}
	for i, a := range algs {
		if a == SlidingWindow && rng.IntN(2) == 0 {
			a = "" // the default, as configuration may spell it
		}
		d.limits = append(d.limits, Limit{Name: fmt.Sprintf("l%d", i), Count: 1 + rng.Int64N(12), Window: windows[rng.IntN(len(windows))], Algorithm: a})
	}
	d.retries = []int64{0}
	var names []string
	for _, l := range d.limits {
		names = append(names, fmt.Sprintf("%s %s %s", l.Name, l.Algorithm.orDefault(), l))
	}
	d.logf("limits: %s", strings.Join(names, ", "))
	for range steps {
		switch r := rng.IntN(100); {
		case r < 6:
			d.changeControl()
		case r < 14:
			l := &d.limits[rng.IntN(len(d.limits))]
			l.Count = 1 + rng.Int64N(12)
			d.logf("%s's count is now %d", l.Name, l.Count)
		default:
			d.request()
		}
	}
	t.Logf("seed %d: %v", seed, d.seen)
}

func (d *differential) logf(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
}

// story is the run so far, one line a step, with the answers of the last
// few requests.
func (d *differential) story(answers int) string {
	var b strings.Builder
	for i, e := range d.log {
		if i < len(d.log)-2*answers {
			e, _, _ = strings.Cut(e, "\n")
		}
		fmt.Fprintf(&b, "\n  %s", e)
	}
	return b.String()
}

// changeControl sets, changes or lifts the identity's control, as the
// admin API stores it; it ends on its own from 10 minutes to 3 hours on.
// The controlled Limiter's watch lists the identity while it holds one, and
// reads the list again at its next decision, as it does
// controls.Propagation later: a decision of an identity it does not list
// is the plain one.
func (d *differential) changeControl() {
	tag := d.ctl.keys.identityTag(diffIdentity)
	if d.rng.IntN(2) == 0 {
		d.control = refControl{}
		d.logf("control lifted")
		if err := d.client.Del(d.ctx, d.ctl.keys.controlKey(tag)).Err(); err != nil {
			d.t.Fatal(err)
		}
		if err := d.client.HDel(d.ctx, d.ctl.keys.networkControlsKey(), identityField(tag)).Err(); err != nil {
			d.t.Fatal(err)
		}
		d.ctl.watch.Invalidate()
		return
	}
	c := controls.Control{Kind: controls.Block, Reason: "differential",
		Until: time.UnixMicro(d.now + (10*time.Minute + time.Duration(d.rng.Int64N(int64(170*time.Minute)))).Microseconds())}
	switch d.rng.IntN(3) {
	case 0:
		c.Kind = controls.Exempt
	case 1:
		c.Kind = controls.Scale
		c.Factor = []float64{0.1, 0.25, 0.5, 1.5, 2, 3}[d.rng.IntN(6)]
	}
	d.control = refControl{kind: c.Kind, milli: int64(math.Round(c.Factor * 1000)), until: c.Until.UnixMicro()}
	d.logf("control %s (x%g for a scale) until %d", c.Kind, c.Factor, d.control.until)
	if err := d.client.Set(d.ctx, d.ctl.keys.controlKey(tag), formatControlRecord(c), 0).Err(); err != nil {
		d.t.Fatal(err)
	}
	watchIdentity(d.t, d.client, d.ctl, diffIdentity)
}

// request steps the clock, then decides or peeks a random few limits on
// either Limiter, and compares the answer with the model's.
func (d *differential) request() {
	if d.clock != nil {
		d.step()
	}
	// Most requests ask the last one's limits again, as one client would:
	// they run out, and a window's edge meets the counts they left.
	if !d.again && (len(d.picked) == 0 || d.rng.IntN(4) == 0) {
		d.picked = d.picked[:0]
		for _, i := range d.rng.Perm(len(d.limits))[:1+d.rng.IntN(4)] {
			d.picked = append(d.picked, pick{i, d.rng.IntN(4) == 0})
		}
	}
	checks := make([]Check, 0, len(d.picked))
	for _, p := range d.picked {
		checks = append(checks, Check{Identity: diffIdentity, Limit: d.limits[p.limit], Shadow: p.shadow})
	}
	limiter, ctl, via := d.ctl, d.control, "controlled"
	if d.rng.IntN(10) < 3 {
		limiter, ctl, via = d.plain, refControl{}, "plain"
	}
	// A cost every limit can admit, under the scale in force too: a cost
	// no scaled limit admits waits for the scale's end, which the
	// controls' own tests pin down.
	most := int64(MaxCount)
	for _, c := range checks {
		l := c.Limit
		if ctl.kind == controls.Scale && ctl.until > d.now {
			l.Count = min(max(l.Count*ctl.milli/1000, 1), MaxCount)
		}
		most = min(most, l.Burst(), c.Limit.Burst())
	}
	switch {
	case d.again:
		d.cost = min(d.cost, most)
	case d.rng.IntN(10) < 3:
		d.cost = 1 + d.rng.Int64N(most)
	default:
		d.cost = 1
	}
	cost := d.cost
	d.again = false
	spend := d.rng.IntN(5) != 0
	decide, verb := limiter.Decide, "decide"
	if !spend {
		decide, verb = limiter.peek, "peek"
	}
	var names []string
	for _, c := range checks {
		names = append(names, fmt.Sprintf("%s(%d)%s", c.Limit.Name, c.Limit.Count, map[bool]string{true: " shadow"}[c.Shadow]))
	}
	d.logf("at %d: %s cost %d via %s: %s", d.now, verb, cost, via, strings.Join(names, ", "))
	got, err := decide(d.ctx, cost, checks...)
	if err != nil {
		d.t.Fatalf("seed %d: %v", d.seed, err)
	}
	if d.clock == nil {
		d.now = got.Decisions[0].At.UnixMicro()
	}
	want := d.model.decide(checks, cost, spend, ctl, d.now)
	if g, w := describe(got), describe(want); g != w {
		d.t.Fatalf("seed %d: the decision differs from the reference (DIFF_SEED=%d replays it)\ngot  %s\nwant %s\nsteps (answers of the last 10):%s",
			d.seed, d.seed, g, w, d.story(10))
	}
	d.seen[fmt.Sprintf("%s %s allowed=%t", verb, got.Control.Kind, got.Allowed)]++
	d.log[len(d.log)-1] += "\n    -> " + strings.ReplaceAll(describe(got), "\n", "\n  ")
	// The request's own RetryAfter (after which every enforced limit
	// admits it), first, then each limit's.
	d.retries = append(d.retries[:0], got.RetryAfter().Microseconds())
	for _, dec := range got.Decisions {
		if dec.RetryAfter > 0 {
			d.retries = append(d.retries, dec.RetryAfter.Microseconds())
		}
	}
}

// step moves the stepped clock: not at all, a little, to the next edge of
// a window or of a bucket, to a denial's RetryAfter or a microsecond
// before it, or by up to two windows.
func (d *differential) step() {
	w := d.limits[d.rng.IntN(len(d.limits))].Window.Microseconds()
	if len(d.picked) > 0 && d.rng.IntN(2) == 0 {
		w = d.limits[d.picked[d.rng.IntN(len(d.picked))].limit].Window.Microseconds()
	}
	var by int64
	switch r := d.rng.IntN(100); {
	case len(d.retries) > 1 && r < 50:
		// After a denial, as a client that honours it: its RetryAfter
		// (the request's, or one limit's), or a microsecond before it,
		// and the same request again.
		i := 0
		if d.rng.IntN(2) == 0 {
			i = 1 + d.rng.IntN(len(d.retries)-1)
		}
		if r := d.retries[i]; r > 0 {
			by, d.again = r-d.rng.Int64N(2), true
		}
	case r < 70:
	case r < 85:
		by = 1 + d.rng.Int64N(w/20)
	case r < 93:
		unit := w
		if d.rng.IntN(2) == 0 {
			unit = w / 10
		}
		by = unit - floorMod(d.now, unit)
	default:
		by = w/2 + d.rng.Int64N(3*w/2)
	}
	t := d.now + by
	for range 2 { // twice: one edge may lead into another's last minute
		for _, l := range d.limits {
			if w := l.Window.Microseconds(); l.Algorithm == FixedWindow && w-floorMod(t, w) < time.Minute.Microseconds() {
				t += w - floorMod(t, w)
			}
		}
	}
	d.now = t
	d.clock.Set(time.UnixMicro(t))
}
