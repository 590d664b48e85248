// Package ctlstore holds what package ratelimit's decisions and package
// controls' admin calls share of the live controls: the record Redis
// holds for a control, the control watch (one process's copy of the
// network-controls hash, read at most once per Propagation on the request
// path), and the handle a Limiter gives package controls to reach its
// client, keys, clock and watch.
package ctlstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/errs"
)

// Propagation is controls.Propagation (which documents it): the watch
// reads the hash again after at most this long.
const Propagation = 2 * time.Second

// MaxScaleMilli is the largest scale factor, in thousandths: 1000 x
// controls.MaxScaleFactor, which is defined from it.
const MaxScaleMilli = 1000 * 1000

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
// An identity's record is the key keys.Space.ControlKey of its tag, in its
// hash slot, expiring when the control ends. Network controls are fields
// of one hash, keys.Space.NetworkControlsKey, each holding a record.
const recordVersion = "v1"

// Record is one control record's fields.
type Record struct {
	// Kind is 'b' (block), 'e' (exempt) or 's' (scale).
	Kind byte
	// Until is the control's end, Unix µs.
	Until int64
	// Milli is a scale's factor in thousandths; 0 for the other kinds.
	Milli int64
	// Reason, By and At (Unix ms) are the metadata.
	Reason, By string
	At         int64
}

type meta struct {
	Reason string `json:"reason"`
	By     string `json:"by,omitempty"`
	At     int64  `json:"at"`
}

// FormatRecord is r's record. r must be valid.
func FormatRecord(r Record) string {
	m, _ := json.Marshal(meta{Reason: r.Reason, By: r.By, At: r.At}) // strings and an int: cannot fail
	return recordVersion + " " + string(r.Kind) + " " + strconv.FormatInt(r.Until, 10) + " " +
		strconv.FormatInt(r.Milli, 10) + " " + string(m)
}

// ParseRecord reads a record FormatRecord wrote. It accepts exactly what
// the decision scripts accept in the first four fields, so a record the
// command lists as a control is the control decisions apply. Its errors
// wrap controls.ErrMalformed.
func ParseRecord(s string) (Record, error) {
	fields := strings.SplitN(s, " ", 5)
	if len(fields) != 5 || fields[0] != recordVersion {
		return Record{}, fmt.Errorf("%w: not a %s record", errs.ErrMalformed, recordVersion)
	}
	var r Record
	switch fields[1] {
	case "b", "e", "s":
		r.Kind = fields[1][0]
	default:
		return Record{}, fmt.Errorf("%w: kind %q", errs.ErrMalformed, truncate(fields[1], 8))
	}
	var err error
	if r.Until, err = ParseDigits(fields[2]); err != nil {
		return Record{}, fmt.Errorf("%w: end: %w", errs.ErrMalformed, err)
	}
	milli, err := ParseDigits(fields[3])
	if err != nil {
		return Record{}, fmt.Errorf("%w: factor: %w", errs.ErrMalformed, err)
	}
	if r.Kind == 's' {
		if milli < 1 || milli > MaxScaleMilli {
			return Record{}, fmt.Errorf("%w: factor %d thousandths out of range", errs.ErrMalformed, milli)
		}
		r.Milli = milli
	}
	var m meta
	if err := json.Unmarshal([]byte(fields[4]), &m); err != nil {
		return Record{}, fmt.Errorf("%w: metadata: %w", errs.ErrMalformed, err)
	}
	r.Reason, r.By, r.At = m.Reason, m.By, m.At
	return r, nil
}

// ParseDigits reads a non-negative decimal of at most 16 digits, the same
// digits the scripts' pattern (%d+) and tonumber accept exactly.
func ParseDigits(s string) (int64, error) {
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

// truncate shortens untrusted text before it goes into an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
