package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// maxWatchedControls bounds the identity controls one process keeps in
// memory to pick the decisions that read a control key, and the identity
// fields the network-controls hash holds (plus one, the overflow field).
// Past it the process watches none by tag: every decision reads its
// identity's control key, as if every
// identity held one: more reads, never fewer than needed. SetControl
// writes a control that would pass it into the overflow field, which puts
// every process reading it in overflow until the latest such control
// ends.
const maxWatchedControls = 1_000

// identityFieldPrefix starts the fields of the network-controls hash that
// mirror identity controls: "i:<tag>" holds the control's end in Unix
// microseconds. A network field is a CIDR, which never starts so.
const identityFieldPrefix = "i:"

// overflowField is the field of the network-controls hash that stands for
// every identity control set while maxWatchedControls identity fields were
// live: it holds the latest of their ends, Unix µs. "*" is no tag (a tag
// is 22 base64url characters). While it is live, every decision of a
// process that read it reads its identity's control key.
const overflowField = identityFieldPrefix + "*"

// controlWatch is a Limiter's copy of the network-controls hash: the
// network controls in force and the tags of the identities that hold a
// control, read at most once per interval on the request path (Lambda
// freezes a process between invocations: a timer would not run). The
// decisions of a Limiter with Options.Controls read an identity's control
// key only when its tag is watched; a NetworkControlCache serves its
// network controls. One read in flight at a time; the others use the last
// list.
type controlWatch struct {
	l *Limiter

	mu       sync.Mutex
	last     *watchState   // the last good read; nil before one
	readAt   time.Time     // when the last read (good or not) started
	inflight chan struct{} // closed when the read in flight ends; nil when none
}

// watchState is one good read of the hash. Never written once published.
type watchState struct {
	readAt   time.Time
	networks []controls.Network // strictest first, at most controls.MaxNetworks
	// tags maps each watched identity's tag to its control's end, Unix µs
	// (maxInt64 for a field whose end could not be read); nil when
	// overflow.
	tags       map[string]int64
	identities int  // identity fields in force when read, the overflow field not counted
	overflow   bool // more than maxWatchedControls, or the overflow field live: every decision reads
	// overflowUntil is the overflow field's end, Unix µs (maxInt64 when
	// it could not be read); 0 when it was not live at the read.
	overflowUntil int64
	// networkProblems is what the read says of the network fields:
	// skipped, or past controls.MaxNetworks.
	networkProblems error
}

// watchReport is what a Limiter's control watch holds, for this package's
// tests: see Limiter.watchReport.
type watchReport struct {
	// Loaded is true once a read of the controls has succeeded. Until
	// then every decision of a Limiter with Options.Controls reads its
	// identity's control key.
	Loaded bool
	// ReadAt is when the last good read started.
	ReadAt time.Time
	// Identities is how many identity controls were in force at that read.
	Identities int
	// Overflow is true when Identities passed maxWatchedControls, or the
	// hash's overflow field was live (OverflowUntil): the process keeps no
	// tag, and every decision reads its identity's control key until a
	// read finds neither.
	Overflow bool
	// OverflowUntil is the end of the overflow field at that read: the
	// latest end of the identity controls SetControl could not mirror by
	// tag (maxWatchedControls fields were live); the largest time
	// UnixMicro gives when its end could not be read (the strictest
	// reading). Zero when it was not live. Lifting a control never
	// brings it earlier: the process leaves overflow at its first read
	// after it, when the fields left are within the bound.
	OverflowUntil time.Time
}

// watchReport reports this process's copy of the controls in force, as
// the decisions and a NetworkControlCache use it. It does not contact
// Redis.
func (l *Limiter) watchReport() watchReport {
	l.watch.mu.Lock()
	s := l.watch.last
	l.watch.mu.Unlock()
	if s == nil {
		return watchReport{}
	}
	st := watchReport{Loaded: true, ReadAt: s.readAt, Identities: s.identities, Overflow: s.overflow}
	if s.overflowUntil > 0 {
		st.OverflowUntil = time.UnixMicro(s.overflowUntil)
	}
	return st
}

// controlled reports whether a decision at now must read the control key
// of tag: when no good read has been made yet, in overflow, or when tag is
// listed with an end after now. A listed end that has passed is still read
// until the list is read again past it, so that a control extended since
// the read is not dropped on a stale end; that costs at most one interval
// of reads after a control ends.
func (s *watchState) controlled(tag string, now time.Time) bool {
	if s == nil || s.overflow {
		return true
	}
	end, ok := s.tags[tag]
	if !ok {
		return false
	}
	us := now.UnixMicro()
	return end > us || end > s.readAt.UnixMicro()
}

// none reports whether no identity can need its control key read: the
// decisions need not even hash a lone check's tag.
func (s *watchState) none() bool { return s != nil && !s.overflow && len(s.tags) == 0 }

// clock is the watch's time: Options.Now, or this process's clock.
func (w *controlWatch) clock() time.Time {
	if w.l.now != nil {
		return w.l.now()
	}
	return time.Now()
}

// forDecision returns the list a decision uses, reading the hash first
// when the list is older than controls.Propagation and no read is in
// flight; a decision never waits for another's read. The read is bounded
// by ctx, the decision's own budget; a failed read keeps the last list,
// and the next read is an interval later.
func (w *controlWatch) forDecision(ctx context.Context) *watchState {
	w.mu.Lock()
	now := w.clock()
	if w.inflight != nil || (!w.readAt.IsZero() && now.Sub(w.readAt) < controls.Propagation && !now.Before(w.readAt)) {
		s := w.last
		w.mu.Unlock()
		return s
	}
	done := make(chan struct{})
	w.inflight, w.readAt = done, now
	w.mu.Unlock()
	s, _ := w.refresh(ctx, now, done)
	return s
}

// refresh reads the hash at now and publishes the list, then wakes the
// waiters. It returns the last good list (the new one when the read
// succeeded) and the read's error.
func (w *controlWatch) refresh(ctx context.Context, now time.Time, done chan struct{}) (*watchState, error) {
	s, err := w.l.readControlsHash(ctx, now)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight = nil
	close(done)
	if s != nil {
		w.last = s
		return s, err
	}
	return w.last, err
}

// invalidate makes the next use read the hash again (for tests that write
// the hash directly).
func (w *controlWatch) invalidate() {
	w.mu.Lock()
	w.readAt = time.Time{}
	w.mu.Unlock()
}

// readControlsHash reads the network-controls hash at now (one HGETALL).
// A failure to read is ErrUnavailable, with no state; a read that skipped
// fields or passed a bound returns its state with an error saying so.
func (l *Limiter) readControlsHash(ctx context.Context, now time.Time) (*watchState, error) {
	fields, err := l.client.HGetAll(ctx, l.keys.networkControlsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("network controls: %w: %w", ErrUnavailable, err)
	}
	list, tags, identities, overflowUntil, malformed := parseNetworkControls(fields, now)
	s := &watchState{readAt: now, identities: identities, overflowUntil: overflowUntil}
	var problems []error
	if malformed > 0 {
		problems = append(problems, fmt.Errorf("network controls: %w: %d field(s) skipped", controls.ErrMalformed, malformed))
	}
	if len(list) > controls.MaxNetworks {
		problems = append(problems, fmt.Errorf("network controls: %w: %d in force, the first %d kept, blocks first", controls.ErrTooMany, len(list), controls.MaxNetworks))
		list = list[:controls.MaxNetworks:controls.MaxNetworks]
	}
	s.networks, s.networkProblems = list, errors.Join(problems...)
	switch {
	case identities > maxWatchedControls:
		s.overflow = true
		problems = append(problems, fmt.Errorf("identity controls: %w: %d in force, more than the %d watched: every decision reads its identity's control", controls.ErrTooMany, identities, maxWatchedControls))
	case overflowUntil > 0:
		s.overflow = true
		problems = append(problems, fmt.Errorf("identity controls: %w: controls past the %d watched are in force until %s: every decision reads its identity's control", controls.ErrTooMany, maxWatchedControls, overflowEnd(overflowUntil)))
	default:
		s.tags = tags
	}
	return s, errors.Join(problems...)
}

// overflowEnd formats the overflow field's end for an error.
func overflowEnd(us int64) string {
	if us == math.MaxInt64 {
		return "an end that cannot be read"
	}
	return time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
}

// identityField is the network-controls hash's field mirroring tag's
// control.
func identityField(tag string) string { return identityFieldPrefix + tag }

// isIdentityField reports whether a field of the hash mirrors an identity
// control, and its tag.
func isIdentityField(field string) (string, bool) {
	return strings.CutPrefix(field, identityFieldPrefix)
}
