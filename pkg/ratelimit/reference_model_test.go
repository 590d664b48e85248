package ratelimit

import (
	"fmt"
	"strings"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// refModel is a reference for the decision scripts: each algorithm's rule
// as its script's header states it, computed from what was spent and when,
// with no packed state, no undo and no script. Remaining, ResetAfter and
// RetryAfter are not formulas here but searches over the rule itself: the
// most units it admits now, and the first instant at which it holds nothing,
// or admits the cost, with no other traffic.
type refModel struct {
	spends map[refKey][]refSpend // every unit spent, by limit state
	gcra   map[refKey]refGCRA
}

// refKey names one limit's state as its Redis key does: not its count.
type refKey struct {
	name   string
	alg    Algorithm
	window time.Duration
}

type refSpend struct{ at, units int64 }

// refGCRA is a token or leaky bucket's state: the backlog, in units x
// window microseconds, at its last spend. It drains at the count of
// whichever decision reads it.
type refGCRA struct{ at, backlog int64 }

// refControl is the live control in force on the identity, as decided.
type refControl struct {
	kind  controls.Kind
	milli int64 // a scale's factor in thousandths
	until int64 // Unix µs
}

func newRefModel() *refModel {
	return &refModel{spends: map[refKey][]refSpend{}, gcra: map[refKey]refGCRA{}}
}

func refKeyOf(l Limit) refKey { return refKey{l.Name, l.Algorithm.orDefault(), l.Window} }

// units is what l's state spent in [from, to).
func (m *refModel) units(l Limit, from, to int64) int64 {
	var n int64
	for _, s := range m.spends[refKeyOf(l)] {
		if s.at >= from && s.at < to {
			n += s.units
		}
	}
	return n
}

func (m *refModel) backlog(l Limit, t int64) int64 {
	g := m.gcra[refKeyOf(l)]
	return max(g.backlog-(t-g.at)*l.Count, 0)
}

// fits reports whether l admits n units at t.
func (m *refModel) fits(l Limit, t, n int64) bool {
	c, w := l.Count, l.Window.Microseconds()
	start := t - floorMod(t, w)
	switch l.Algorithm.orDefault() {
	case TokenBucket, LeakyBucket:
		return m.backlog(l, t)+n*w <= l.Burst()*w
	case FixedWindow:
		return m.units(l, start, t+1)+n <= c
	case SlidingLog:
		return m.units(l, t-w+1, t+1)+n <= c
	case SlidingBuckets:
		// Ten buckets of w/10 (w is whole milliseconds): the last ten in
		// full and the one before weighted by what is left of this one,
		// and all eleven under 1.1 x count.
		bl := w / 10
		b := floorDiv(t, bl)
		recent, old := m.units(l, (b-9)*bl, t+1), m.units(l, (b-10)*bl, (b-9)*bl)
		return recent+old+n <= c*11/10 && (recent+n)*bl+old*((b+1)*bl-t) <= c*bl
	}
	previous, current := m.units(l, start-w, start), m.units(l, start, t+1)
	return previous*(w-(t-start))+(current+n)*w <= c*w
}

// idle reports whether l's state holds nothing that counts at t.
func (m *refModel) idle(l Limit, t int64) bool {
	w := l.Window.Microseconds()
	start := t - floorMod(t, w)
	switch l.Algorithm.orDefault() {
	case TokenBucket, LeakyBucket:
		return m.backlog(l, t) == 0
	case FixedWindow:
		return m.units(l, start, t+1) == 0
	case SlidingLog:
		return m.units(l, t-w+1, t+1) == 0
	case SlidingBuckets:
		bl := w / 10
		return m.units(l, (floorDiv(t, bl)-10)*bl, t+1) == 0
	}
	return m.units(l, start-w, t+1) == 0
}

func (m *refModel) spend(l Limit, t, n int64) {
	k := refKeyOf(l)
	if k.alg == TokenBucket || k.alg == LeakyBucket {
		m.gcra[k] = refGCRA{t, m.backlog(l, t) + n*l.Window.Microseconds()}
		return
	}
	m.spends[k] = append(m.spends[k], refSpend{t, n})
}

// first is the smallest wait w >= from after which ok holds at now+w (ok
// only turns true as time passes), or -1 when it never does.
func first(now, from int64, ok func(t int64) bool) int64 {
	lo, hi := from, int64(1)<<42
	if !ok(now + hi) {
		return -1
	}
	for lo < hi {
		if mid := lo + (hi-lo)/2; ok(now + mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// decide is what Decide (spend) or a peek answers at now for checks of one
// identity under ctl (kind controls.None for none), and spends as Decide
// does: nothing unless every enforced check admits the cost, then on every
// check that admits it on its own.
func (m *refModel) decide(checks []Check, cost int64, spend bool, ctl refControl, now int64) Result {
	res := Result{Allowed: true, Decisions: make([]Decision, len(checks))}
	at := time.UnixMicro(now)
	if ctl.kind != controls.None && ctl.until <= now {
		ctl.kind = controls.None
	}
	if ctl.kind != controls.None {
		res.Control = controls.Applied{Kind: ctl.kind, Until: time.UnixMicro(ctl.until), Factor: float64(ctl.milli) / 1000}
	}
	if ctl.kind == controls.Block {
		wait := micros(max(ctl.until-now, 1))
		for i, c := range checks {
			res.Decisions[i] = Decision{Limit: c.Limit, ResetAfter: wait, RetryAfter: wait, At: at, Shadow: c.Shadow}
		}
		res.Allowed = false
		return res
	}
	limits := make([]Limit, len(checks))
	own := make([]bool, len(checks))
	for i, c := range checks {
		limits[i] = c.Limit
		if ctl.kind == controls.Scale {
			limits[i].Count = min(max(c.Limit.Count*ctl.milli/1000, 1), MaxCount)
		}
		own[i] = m.fits(limits[i], now, cost)
		res.Allowed = res.Allowed && (own[i] || c.Shadow)
	}
	if ctl.kind == controls.Exempt {
		res.Allowed, spend = true, false
	}
	if spend && res.Allowed {
		for i, l := range limits {
			if own[i] {
				m.spend(l, now, cost)
			}
		}
	}
	for i, l := range limits {
		d := Decision{Limit: l, Allowed: own[i] || ctl.kind == controls.Exempt, At: at, Shadow: checks[i].Shadow}
		for n := l.Burst(); n > 0 && d.Remaining == 0; n-- {
			if m.fits(l, now, n) {
				d.Remaining = n
			}
		}
		d.ResetAfter = micros(first(now, 0, func(t int64) bool { return m.idle(l, t) }))
		if !d.Allowed {
			d.RetryAfter = micros(first(now, 1, func(t int64) bool { return m.fits(l, t, cost) }))
		}
		res.Decisions[i] = d
	}
	return res
}

// describe renders a Result with every field the reference decides, for
// comparison and for failure messages.
func describe(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "allowed=%t control=%s", r.Allowed, r.Control.Kind)
	if r.Control.Kind != controls.None {
		fmt.Fprintf(&b, "(x%g until %d)", r.Control.Factor, r.Control.Until.UnixMicro())
	}
	for _, d := range r.Decisions {
		fmt.Fprintf(&b, "\n    %s %s %s shadow=%t: allowed=%t remaining=%d reset=%dus retry=%dus at=%d",
			d.Limit.Name, d.Limit.Algorithm.orDefault(), d.Limit, d.Shadow, d.Allowed, d.Remaining,
			d.ResetAfter.Microseconds(), d.RetryAfter.Microseconds(), d.At.UnixMicro())
	}
	return b.String()
}
