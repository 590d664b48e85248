package ratelimit

import (
	"fmt"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Live controls inside the decision (Options.Controls). Every script call
// of an identity's checks also reads that identity's control key (the last
// of its KEYS) and applies the control in the same call (lua/mixed.lua):
//
//   - block: every check of the identity is denied and nothing is spent;
//     no algorithm runs. Each Decision has Allowed false, Remaining 0 and
//     RetryAfter and ResetAfter both the block's end minus now on the
//     Redis clock.
//   - exempt: the request is admitted and nothing is spent: the algorithms
//     run as a peek, so each Decision's Remaining and ResetAfter are the
//     identity's honest counts; each Decision is Allowed with no
//     RetryAfter (the request passes).
//   - scale: every limit of the identity is decided with its count scaled
//     (scaledLimit), on the same keys, and each Decision's Limit carries
//     the scaled count, for the headers.
//
// A record that cannot be read (what ctlstore.ParseRecord refuses) is
// ignored and reported as Malformed; one whose end has passed is ignored.
// With no record, the reply is exactly the algorithm's.

// controlReply is the control a controlled script's reply ended with.
type controlReply struct {
	kind  int64 // controlNone, or a controlReply code below
	until int64 // Unix µs
	milli int64 // a scale's factor in thousandths
}

// The codes of controlReply.kind, as lua/mixed.lua sends them.
const (
	controlNone      = -1 // no record in force: the reply had no control
	controlMalformed = 0
	controlBlock     = 1
	controlExempt    = 2
	controlScale     = 3
)

// groupReplyLen is the length of a group script's reply without a control.
func groupReplyLen(g group) int {
	if counterReply(g.algorithm) {
		return 2 + len(g.indexes)
	}
	return 2 + 4*len(g.indexes)
}

// splitControl separates a controlled script's reply into the decision's
// reply and the control it ended with. want is the length of the decision's
// reply (at least 3). A block's reply is { 0, now, control }: for a group
// script no decision's reply holds an array, and the mixed script's reply
// is never 3 long (it has two groups or more).
func splitControl(vals []any, want int) ([]any, controlReply, error) {
	if len(vals) == 3 {
		if t, ok := vals[2].([]any); ok {
			ctl, err := readControl(t)
			if err != nil {
				return nil, controlReply{}, err
			}
			if ctl.kind != controlBlock {
				return nil, controlReply{}, fmt.Errorf("%w: script reply holds a %d control without its decision", ErrUnavailable, ctl.kind)
			}
			if _, ok := vals[1].(int64); !ok {
				return nil, controlReply{}, fmt.Errorf("%w: script reply value 1 is %T, want an integer", ErrUnavailable, vals[1])
			}
			return vals[:2], ctl, nil
		}
	}
	switch len(vals) {
	case want:
		return vals, controlReply{kind: controlNone}, nil
	case want + 1:
		t, ok := vals[want].([]any)
		if !ok {
			return nil, controlReply{}, fmt.Errorf("%w: script reply value %d is %T, want a control", ErrUnavailable, want, vals[want])
		}
		ctl, err := readControl(t)
		if err != nil {
			return nil, controlReply{}, err
		}
		if ctl.kind == controlBlock {
			return nil, controlReply{}, fmt.Errorf("%w: script reply holds a block with a decision", ErrUnavailable)
		}
		return vals[:want], ctl, nil
	}
	return nil, controlReply{}, fmt.Errorf("%w: script reply has %d values, want %d or %d", ErrUnavailable, len(vals), want, want+1)
}

// readControl reads { kind, until_us, milli }.
func readControl(t []any) (controlReply, error) {
	if len(t) != 3 {
		return controlReply{}, fmt.Errorf("%w: script reply's control has %d values, want 3", ErrUnavailable, len(t))
	}
	var f [3]int64
	for i, v := range t {
		n, ok := v.(int64)
		if !ok {
			return controlReply{}, fmt.Errorf("%w: script reply's control value %d is %T, want an integer", ErrUnavailable, i, v)
		}
		f[i] = n
	}
	ctl := controlReply{kind: f[0], until: f[1], milli: f[2]}
	switch ctl.kind {
	case controlMalformed, controlBlock, controlExempt:
	case controlScale:
		if ctl.milli < 1 || ctl.milli > controls.MaxScaleFactor*1000 {
			return controlReply{}, fmt.Errorf("%w: script reply's scale is %d thousandths", ErrUnavailable, ctl.milli)
		}
	default:
		return controlReply{}, fmt.Errorf("%w: script reply's control kind is %d", ErrUnavailable, ctl.kind)
	}
	return ctl, nil
}

// controlledDecisions fills in the decisions of groups of one identity
// from a controlled script's reply, split by splitControl: one group's
// reply, or the mixed script's for several.
func controlledDecisions(body []any, ctl controlReply, cost int64, spend bool, checks []Check, groups []group, out []Decision) (bool, controls.Applied, error) {
	decode := func(spend bool, milli int64) (bool, error) {
		if len(groups) == 1 {
			return groupDecisions(body, cost, spend, checks, groups[0], milli, out)
		}
		return mixedDecisions(body, cost, spend, checks, groups, milli, out)
	}
	until := time.UnixMicro(ctl.until)
	switch ctl.kind {
	case controlBlock:
		now := body[1].(int64) // splitControl checked it
		wait := micros(max(ctl.until-now, 1))
		for _, g := range groups {
			for _, ci := range g.indexes {
				out[ci] = Decision{
					Limit:      checks[ci].Limit,
					ResetAfter: wait,
					RetryAfter: wait,
					At:         time.UnixMicro(now),
					Shadow:     checks[ci].Shadow,
				}
			}
		}
		return false, controls.Applied{Kind: controls.Block, Until: until}, nil
	case controlExempt:
		if _, err := decode(false, 0); err != nil {
			return false, controls.Applied{}, err
		}
		for _, g := range groups {
			for _, ci := range g.indexes {
				out[ci].Allowed, out[ci].RetryAfter = true, 0
			}
		}
		return true, controls.Applied{Kind: controls.Exempt, Until: until}, nil
	case controlScale:
		ok, err := decode(spend, ctl.milli)
		if err != nil {
			return false, controls.Applied{}, err
		}
		for _, g := range groups {
			for _, ci := range g.indexes {
				d := &out[ci]
				// A cost the scaled limit can never admit waits for the
				// scale's end.
				if !d.Allowed && cost > d.Limit.Burst() {
					d.RetryAfter = max(d.RetryAfter, until.Sub(d.At))
				}
			}
		}
		return ok, controls.Applied{Kind: controls.Scale, Until: until, Factor: float64(ctl.milli) / 1000}, nil
	}
	ok, err := decode(spend, 0)
	if err != nil {
		return false, controls.Applied{}, err
	}
	return ok, controls.Applied{Malformed: ctl.kind == controlMalformed}, nil
}

// scaledCount is the count a limit of count applies under a scale of
// milli thousandths: floor(count x factor), at least 1, at most MaxCount.
// The scripts compute it the same way, in integers.
func scaledCount(count, milli int64) int64 {
	c := count * milli / 1000
	return min(max(c, 1), MaxCount)
}

// scaledLimit is l under a scale of milli thousandths (none for 0): its
// count scaledCount(l.Count, milli), further capped at what keeps count x
// window exact for its algorithm (checkScale: in milliseconds for the
// sliding window, in microseconds for the others but the fixed window,
// which has no bound), the strictest count that still computes exactly.
// lua/mixed.lua computes the same.
func scaledLimit(l Limit, milli int64) Limit {
	if milli == 0 {
		return l
	}
	n := scaledCount(l.Count, milli)
	switch l.Algorithm.orDefault() {
	case FixedWindow:
	case SlidingWindow:
		n = min(n, maxCountWindow/l.Window.Milliseconds())
	default:
		n = min(n, maxCountWindow/l.Window.Microseconds())
	}
	l.Count = n
	return l
}

// strictestControl is the control Result.Control reports when a request
// checks several identities and more than one control applied: a block
// first (the one that ends last), then a scale (the smallest factor, then
// the one that ends last), then an exemption (the one that ends last).
// Malformed is set when any identity's record was.
func strictestControl(a, b controls.Applied) controls.Applied {
	malformed := a.Malformed || b.Malformed
	rank := func(c controls.Applied) int {
		switch c.Kind {
		case controls.Block:
			return 3
		case controls.Scale:
			return 2
		case controls.Exempt:
			return 1
		}
		return 0
	}
	best := a
	switch ra, rb := rank(a), rank(b); {
	case rb > ra:
		best = b
	case rb == ra && b.Kind == controls.Scale && b.Factor != a.Factor:
		if b.Factor < a.Factor {
			best = b
		}
	case rb == ra && b.Until.After(a.Until):
		best = b
	}
	best.Malformed = malformed
	return best
}
