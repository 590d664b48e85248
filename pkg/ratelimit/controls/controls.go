// Package controls holds the values of live controls: what an operator
// sets on one identity or one network ([Control], of a [Kind]), its
// bounds and its validation, what a decision applied ([Applied]), and how
// the stored controls read back ([Entry], [Network]).
//
// A [Store], which a Limiter's Controls method returns, stores them on the
// Limiter's keys: [Store.Set], [Store.Lift], [Store.Get] and [Store.List]
// for identities, [Store.SetNetwork], [Store.LiftNetwork] and
// [Store.Networks] for networks. A Limiter with Options.Controls applies
// an identity's control inside the decision's one script call and reports
// it as Result.Control; a [NetworkControlCache] serves the network controls
// to the caller, which matches addresses against them. Every change
// reaches every warm instance within [Propagation].
package controls

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"
	"unicode"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/ctlstore"
	"github.com/slidegate/slidegate/pkg/ratelimit/internal/errs"
)

// Kind is what a live control does to the decisions of the identity or
// network it is set on.
type Kind uint8

// The kinds of live control.
const (
	// None: no control applies.
	None Kind = iota
	// Block denies every request, spending nothing, until the control
	// ends.
	Block
	// Exempt admits every request without spending.
	Exempt
	// Scale multiplies the count of every limit of the identity by the
	// control's Factor, on the same keys (identity controls only).
	Scale
)

// String returns "none", "block", "exempt" or "scale".
func (k Kind) String() string {
	switch k {
	case Block:
		return "block"
	case Exempt:
		return "exempt"
	case Scale:
		return "scale"
	}
	return "none"
}

// ParseKind reads the name String gives, except "none". Any other name is
// an error wrapping ratelimit.ErrInvalid.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "block":
		return Block, nil
	case "exempt":
		return Exempt, nil
	case "scale":
		return Scale, nil
	}
	return None, fmt.Errorf("%w: control kind %q: want block, exempt or scale", errs.ErrInvalid, truncate(s, 32))
}

// Bounds of a Control.
const (
	// MaxDuration is the longest a control may last: every control ends,
	// and none is forgotten in force.
	MaxDuration = 30 * 24 * time.Hour
	// MinScaleFactor and MaxScaleFactor bound a scale control's Factor,
	// from 0.001 to 1000, which is kept to three decimals.
	MinScaleFactor = 0.001
	MaxScaleFactor = ctlstore.MaxScaleMilli / 1000
	// maxReason and maxSetBy bound a control's Reason and SetBy, in
	// bytes.
	maxReason = 200
	maxSetBy  = 200
)

// MaxNetworks bounds the network controls in force: every instance reads
// them all, and keeps at most this many.
const MaxNetworks = 1_000

// Propagation, 2 seconds, bounds how long a change of control takes to
// reach every warm instance: a Gate whose Limiter reads controls keeps no denial in
// its deny cache longer than this, and a Limiter's control watch (the
// identities holding a control, and the network controls a
// NetworkControlCache serves) is read again after at most this long, so a
// new identity control applies within it plus one request.
const Propagation = ctlstore.Propagation

// Control is an operator's live control on one identity or network.
type Control struct {
	// Kind is what the control does.
	Kind Kind
	// Factor multiplies every limit's count under Scale (the scaled count
	// is floor(Count x Factor), at least 1, at most ratelimit.MaxCount);
	// zero for the other kinds.
	Factor float64
	// Until is when the control ends; Redis forgets it then.
	Until time.Time
	// Reason says why it was set, for whoever reads the list later.
	Reason string
	// SetBy names who set it: an operator's name or an IAM principal.
	SetBy string
	// SetAt is when it was set.
	SetAt time.Time
}

// Validate reports whether c can be stored at now: a known kind, a factor
// within bounds for a scale (and none otherwise), an end after now and no
// more than MaxDuration after it, a reason, and printable text of at most
// 200 bytes in Reason and in SetBy. Its errors wrap ratelimit.ErrInvalid.
func (c Control) Validate(now time.Time) error {
	switch c.Kind {
	case Block, Exempt:
		if c.Factor != 0 {
			return fmt.Errorf("%w: a %s control takes no factor", errs.ErrInvalid, c.Kind)
		}
	case Scale:
		if math.IsNaN(c.Factor) || c.Factor < MinScaleFactor || c.Factor > MaxScaleFactor {
			return fmt.Errorf("%w: scale factor %g out of range %g..%g", errs.ErrInvalid, c.Factor, MinScaleFactor, float64(MaxScaleFactor))
		}
		if m := c.Factor * 1000; math.Abs(m-math.Round(m)) > 1e-9*m {
			return fmt.Errorf("%w: scale factor %g has more than three decimals", errs.ErrInvalid, c.Factor)
		}
	default:
		return fmt.Errorf("%w: control kind %d unknown", errs.ErrInvalid, c.Kind)
	}
	if !c.Until.After(now) {
		return fmt.Errorf("%w: control ends at %s, not after now (%s)", errs.ErrInvalid, c.Until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if c.Until.Sub(now) > MaxDuration {
		return fmt.Errorf("%w: control lasts %s, more than the %s allowed", errs.ErrInvalid, c.Until.Sub(now).Round(time.Second), MaxDuration)
	}
	if strings.TrimSpace(c.Reason) == "" {
		return fmt.Errorf("%w: a control needs a reason", errs.ErrInvalid)
	}
	if err := checkText("reason", c.Reason, maxReason); err != nil {
		return err
	}
	return checkText("set-by", c.SetBy, maxSetBy)
}

func checkText(field, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%w: control %s is %d bytes, more than %d", errs.ErrInvalid, field, len(s), limit)
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: control %s holds a control character or invalid UTF-8", errs.ErrInvalid, field)
		}
	}
	return nil
}

// Applied is the live control a decision applied, as ratelimit's Result
// reports it.
type Applied struct {
	// Kind is the control that changed the decision; None when none did.
	Kind Kind
	// Until is when that control ends.
	Until time.Time
	// Factor is a scale control's factor.
	Factor float64
	// Malformed is true when a control record was found but could not be
	// read: it was ignored and the decision made as if there were none.
	Malformed bool
}

// Entry is one identity control as Store.List reads it.
type Entry struct {
	// Tag is the identity's hash tag (its keyed hash, as in its keys):
	// identities are never stored in clear, so the list cannot name them.
	Tag string
	// Control is the control; zero when Malformed.
	Control Control
	// Malformed is true when the record could not be read. Decisions
	// ignore it; lifting the identity's control removes it.
	Malformed bool
}

// Network is a control on every address of a network.
type Network struct {
	// Prefix is the network, with no host bits set.
	Prefix netip.Prefix
	// Control is a block or an exemption.
	Control Control
}

// ErrMalformed wraps the error for a control record that cannot be read:
// not one the command or the operator function wrote. Decisions ignore
// such a record; the admin calls report it.
var ErrMalformed = errs.ErrMalformed

// ErrTooMany wraps a refusal to store a control past 10,000 identity
// controls in force or MaxNetworks (with ratelimit.ErrInvalid), and a read
// of more network controls than MaxNetworks (the list returned keeps the
// strictest).
var ErrTooMany = errs.ErrTooMany

// truncate shortens s to n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
