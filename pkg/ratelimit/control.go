package ratelimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ControlKind is what a live control does to the decisions of the identity
// or network it is set on.
type ControlKind uint8

// The kinds of live control.
const (
	// ControlNone: no control applies.
	ControlNone ControlKind = iota
	// ControlBlock denies every request, spending nothing, until the
	// control ends.
	ControlBlock
	// ControlExempt admits every request without spending.
	ControlExempt
	// ControlScale multiplies the count of every limit of the identity by
	// the control's Factor, on the same keys (identity controls only).
	ControlScale
)

// String returns "none", "block", "exempt" or "scale".
func (k ControlKind) String() string {
	switch k {
	case ControlBlock:
		return "block"
	case ControlExempt:
		return "exempt"
	case ControlScale:
		return "scale"
	}
	return "none"
}

// ParseControlKind reads the name String gives, except "none".
func ParseControlKind(s string) (ControlKind, error) {
	switch s {
	case "block":
		return ControlBlock, nil
	case "exempt":
		return ControlExempt, nil
	case "scale":
		return ControlScale, nil
	}
	return ControlNone, fmt.Errorf("%w: control kind %q: want block, exempt or scale", ErrInvalid, truncate(s, 32))
}

// Bounds of a Control.
const (
	// MaxControlDuration is the longest a control may last: every control
	// ends, and none is forgotten in force.
	MaxControlDuration = 30 * 24 * time.Hour
	// MinScaleFactor and MaxScaleFactor bound a scale control's Factor,
	// which is kept to three decimals.
	MinScaleFactor = 0.001
	MaxScaleFactor = 1000
	// MaxControlReason and MaxControlSetBy bound a control's Reason and
	// SetBy, in bytes.
	MaxControlReason = 200
	MaxControlSetBy  = 200
)

// ControlPropagation bounds how long a change of control takes to reach
// every warm instance: a Gate whose Limiter reads controls keeps no
// denial in its deny cache longer than this, and a Limiter's control
// watch (the identities holding a control, and the network controls a
// NetworkControlCache serves) is read again after at most this long, so a
// new identity control applies within it plus one request.
const ControlPropagation = 2 * time.Second

// Control is an operator's live control on one identity or network.
type Control struct {
	// Kind is what the control does.
	Kind ControlKind
	// Factor multiplies every limit's count under ControlScale (the
	// scaled count is floor(Count x Factor), at least 1, at most
	// MaxCount); zero for the other kinds.
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
// more than MaxControlDuration after it, a reason, and printable text.
func (c Control) Validate(now time.Time) error {
	switch c.Kind {
	case ControlBlock, ControlExempt:
		if c.Factor != 0 {
			return fmt.Errorf("%w: a %s control takes no factor", ErrInvalid, c.Kind)
		}
	case ControlScale:
		if math.IsNaN(c.Factor) || c.Factor < MinScaleFactor || c.Factor > MaxScaleFactor {
			return fmt.Errorf("%w: scale factor %g out of range %g..%g", ErrInvalid, c.Factor, MinScaleFactor, float64(MaxScaleFactor))
		}
		if m := c.Factor * 1000; math.Abs(m-math.Round(m)) > 1e-9*m {
			return fmt.Errorf("%w: scale factor %g has more than three decimals", ErrInvalid, c.Factor)
		}
	default:
		return fmt.Errorf("%w: control kind %d unknown", ErrInvalid, c.Kind)
	}
	if !c.Until.After(now) {
		return fmt.Errorf("%w: control ends at %s, not after now (%s)", ErrInvalid, c.Until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if c.Until.Sub(now) > MaxControlDuration {
		return fmt.Errorf("%w: control lasts %s, more than the %s allowed", ErrInvalid, c.Until.Sub(now).Round(time.Second), MaxControlDuration)
	}
	if strings.TrimSpace(c.Reason) == "" {
		return fmt.Errorf("%w: a control needs a reason", ErrInvalid)
	}
	if err := checkControlText("reason", c.Reason, MaxControlReason); err != nil {
		return err
	}
	return checkControlText("set-by", c.SetBy, MaxControlSetBy)
}

func checkControlText(field, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%w: control %s is %d bytes, more than %d", ErrInvalid, field, len(s), limit)
	}
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: control %s holds a control character or invalid UTF-8", ErrInvalid, field)
		}
	}
	return nil
}

// factorMilli is the factor in thousandths, as the record and the scripts
// hold it.
func factorMilli(f float64) int64 { return int64(math.Round(f * 1000)) }

// ScaledCount is the count a limit of count applies under a scale of
// factorMilli thousandths: floor(count x factor), at least 1, at most
// MaxCount. The scripts compute it the same way, in integers.
func scaledCount(count, milli int64) int64 {
	c := count * milli / 1000
	return min(max(c, 1), MaxCount)
}

// A control record is what Redis holds for one control, as one string:
//
//	v1 <kind> <until, Unix µs> <factor in thousandths> <metadata JSON>
//
// kind is b (block), e (exempt) or s (scale); the factor is 0 but for a
// scale. The decision scripts read only the first four fields (a Lua
// pattern, no JSON); the metadata is for people listing controls:
//
//	{"reason":"...","by":"...","at":<Unix ms>}
//
// An identity's record is the key controlKey of its tag, in its hash slot,
// expiring when the control ends. Network controls are fields of one hash,
// networkControlsKey, each holding a record.
const controlRecordVersion = "v1"

type controlMeta struct {
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
	At     int64  `json:"at"`
}

// formatControlRecord is the record of c. c must be valid.
func formatControlRecord(c Control) string {
	code := "b"
	switch c.Kind {
	case ControlExempt:
		code = "e"
	case ControlScale:
		code = "s"
	}
	meta, _ := json.Marshal(controlMeta{Reason: c.Reason, By: c.SetBy, At: c.SetAt.UnixMilli()}) // strings and an int: cannot fail
	milli := int64(0)
	if c.Kind == ControlScale {
		milli = factorMilli(c.Factor)
	}
	return controlRecordVersion + " " + code + " " + strconv.FormatInt(c.Until.UnixMicro(), 10) + " " +
		strconv.FormatInt(milli, 10) + " " + string(meta)
}

// errMalformedControl is what parseControlRecord wraps for a record it
// cannot read.
var errMalformedControl = errors.New("malformed control record")

// parseControlRecord reads a record formatControlRecord wrote. It accepts
// exactly what the decision scripts accept in the first four fields, so a
// record the command lists as a control is the control decisions apply.
func parseControlRecord(s string) (Control, error) {
	fields := strings.SplitN(s, " ", 5)
	if len(fields) != 5 || fields[0] != controlRecordVersion {
		return Control{}, fmt.Errorf("%w: not a %s record", errMalformedControl, controlRecordVersion)
	}
	var c Control
	switch fields[1] {
	case "b":
		c.Kind = ControlBlock
	case "e":
		c.Kind = ControlExempt
	case "s":
		c.Kind = ControlScale
	default:
		return Control{}, fmt.Errorf("%w: kind %q", errMalformedControl, truncate(fields[1], 8))
	}
	until, err := parseDigits(fields[2])
	if err != nil {
		return Control{}, fmt.Errorf("%w: end: %w", errMalformedControl, err)
	}
	c.Until = time.UnixMicro(until)
	milli, err := parseDigits(fields[3])
	if err != nil {
		return Control{}, fmt.Errorf("%w: factor: %w", errMalformedControl, err)
	}
	if c.Kind == ControlScale {
		if milli < 1 || milli > MaxScaleFactor*1000 {
			return Control{}, fmt.Errorf("%w: factor %d thousandths out of range", errMalformedControl, milli)
		}
		c.Factor = float64(milli) / 1000
	}
	var meta controlMeta
	if err := json.Unmarshal([]byte(fields[4]), &meta); err != nil {
		return Control{}, fmt.Errorf("%w: metadata: %w", errMalformedControl, err)
	}
	c.Reason, c.SetBy = meta.Reason, meta.By
	c.SetAt = time.UnixMilli(meta.At)
	return c, nil
}

// parseDigits reads a non-negative decimal of at most 16 digits, the same
// digits the scripts' pattern (%d+) and tonumber accept exactly.
func parseDigits(s string) (int64, error) {
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("%q is not 1 to 16 digits", truncate(s, 20))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not 1 to 16 digits", truncate(s, 20))
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// AppliedControl is the live control a decision applied, as Result
// reports it.
type AppliedControl struct {
	// Kind is the control that changed the decision; ControlNone when
	// none did.
	Kind ControlKind
	// Until is when that control ends.
	Until time.Time
	// Factor is a scale control's factor.
	Factor float64
	// Malformed is true when a control record was found but could not be
	// read: it was ignored and the decision made as if there were none.
	Malformed bool
}
