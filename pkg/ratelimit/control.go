package ratelimit

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

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
func formatControlRecord(c controls.Control) string {
	code := "b"
	switch c.Kind {
	case controls.Exempt:
		code = "e"
	case controls.Scale:
		code = "s"
	}
	meta, _ := json.Marshal(controlMeta{Reason: c.Reason, By: c.SetBy, At: c.SetAt.UnixMilli()}) // strings and an int: cannot fail
	milli := int64(0)
	if c.Kind == controls.Scale {
		milli = factorMilli(c.Factor)
	}
	return controlRecordVersion + " " + code + " " + strconv.FormatInt(c.Until.UnixMicro(), 10) + " " +
		strconv.FormatInt(milli, 10) + " " + string(meta)
}

// parseControlRecord reads a record formatControlRecord wrote. It accepts
// exactly what the decision scripts accept in the first four fields, so a
// record the command lists as a control is the control decisions apply.
func parseControlRecord(s string) (controls.Control, error) {
	fields := strings.SplitN(s, " ", 5)
	if len(fields) != 5 || fields[0] != controlRecordVersion {
		return controls.Control{}, fmt.Errorf("%w: not a %s record", controls.ErrMalformed, controlRecordVersion)
	}
	var c controls.Control
	switch fields[1] {
	case "b":
		c.Kind = controls.Block
	case "e":
		c.Kind = controls.Exempt
	case "s":
		c.Kind = controls.Scale
	default:
		return controls.Control{}, fmt.Errorf("%w: kind %q", controls.ErrMalformed, truncate(fields[1], 8))
	}
	until, err := parseDigits(fields[2])
	if err != nil {
		return controls.Control{}, fmt.Errorf("%w: end: %w", controls.ErrMalformed, err)
	}
	c.Until = time.UnixMicro(until)
	milli, err := parseDigits(fields[3])
	if err != nil {
		return controls.Control{}, fmt.Errorf("%w: factor: %w", controls.ErrMalformed, err)
	}
	if c.Kind == controls.Scale {
		if milli < 1 || milli > controls.MaxScaleFactor*1000 {
			return controls.Control{}, fmt.Errorf("%w: factor %d thousandths out of range", controls.ErrMalformed, milli)
		}
		c.Factor = float64(milli) / 1000
	}
	var meta controlMeta
	if err := json.Unmarshal([]byte(fields[4]), &meta); err != nil {
		return controls.Control{}, fmt.Errorf("%w: metadata: %w", controls.ErrMalformed, err)
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
