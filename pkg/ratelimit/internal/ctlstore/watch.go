package ctlstore

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/errs"
)

// MaxWatched bounds the identity controls one process keeps in memory to
// pick the decisions that read a control key, and the identity fields the
// network-controls hash holds (plus one, the overflow field). Past it the
// process watches none by tag: every decision reads its identity's control
// key, as if every identity held one: more reads, never fewer than needed.
// Store.Set writes a control that would pass it into the overflow field,
// which puts every process reading it in overflow until the latest such
// control ends.
const MaxWatched = 1_000

// identityFieldPrefix starts the fields of the network-controls hash that
// mirror identity controls: "i:<tag>" holds the control's end in Unix
// microseconds. A network field is a CIDR, which never starts so.
const identityFieldPrefix = "i:"

// OverflowField is the field of the network-controls hash that stands for
// every identity control set while MaxWatched identity fields were live:
// it holds the latest of their ends, Unix µs. "*" is no tag (a tag is 22
// base64url characters). While it is live, every decision of a process
// that read it reads its identity's control key.
const OverflowField = identityFieldPrefix + "*"

// IdentityField is the network-controls hash's field mirroring tag's
// control.
func IdentityField(tag string) string { return identityFieldPrefix + tag }

// IsIdentityField reports whether a field of the hash mirrors an identity
// control, and its tag.
func IsIdentityField(field string) (string, bool) {
	return strings.CutPrefix(field, identityFieldPrefix)
}

// HashReader reads the network-controls hash.
type HashReader interface {
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
}

// Watch is a Limiter's copy of the network-controls hash: the tags of the
// identities that hold a control and the network controls' fields, read at
// most once per Propagation on the request path (Lambda freezes a process
// between invocations: a timer would not run). The decisions of a Limiter
// with Options.Controls read an identity's control key only when its tag
// is watched; a controls.NetworkControlCache serves its network controls.
// One read in flight at a time; the others use the last list.
type Watch struct {
	client HashReader
	key    string
	now    func() time.Time

	mu       sync.Mutex
	last     *State        // the last good read; nil before one
	readAt   time.Time     // when the last read (good or not) started
	inflight chan struct{} // closed when the read in flight ends; nil when none
}

// NewWatch returns a watch of the hash at key, on the clock now
// (Options.Now; this process's clock when nil). It does not contact
// Redis.
func NewWatch(client HashReader, key string, now func() time.Time) *Watch {
	return &Watch{client: client, key: key, now: now}
}

// State is one good read of the hash. Never written once published.
type State struct {
	// ReadAt is when the read started.
	ReadAt time.Time
	// Fields is the hash as read: the network controls' fields with the
	// rest. Shared: never to be modified.
	Fields map[string]string
	// tags maps each watched identity's tag to its control's end, Unix µs
	// (maxInt64 for a field whose end could not be read); nil when
	// overflow.
	tags map[string]int64
	// Identities is how many identity fields were in force at the read,
	// the overflow field not counted.
	Identities int
	// Overflow is true when Identities passed MaxWatched, or the overflow
	// field was live (OverflowUntil): every decision reads its identity's
	// control key.
	Overflow bool
	// OverflowUntil is the overflow field's end, Unix µs (maxInt64 when
	// it could not be read); 0 when it was not live at the read.
	OverflowUntil int64
	// Malformed counts the identity fields that could not be read.
	Malformed int
}

// Controlled reports whether a decision at now must read the control key
// of tag: when no good read has been made yet, in overflow, or when tag is
// listed with an end after now. A listed end that has passed is still read
// until the list is read again past it, so that a control extended since
// the read is not dropped on a stale end; that costs at most one interval
// of reads after a control ends.
func (s *State) Controlled(tag string, now time.Time) bool {
	if s == nil || s.Overflow {
		return true
	}
	end, ok := s.tags[tag]
	if !ok {
		return false
	}
	us := now.UnixMicro()
	return end > us || end > s.ReadAt.UnixMicro()
}

// None reports whether no identity can need its control key read: the
// decisions need not even hash a lone check's tag.
func (s *State) None() bool { return s != nil && !s.Overflow && len(s.tags) == 0 }

// IdentityProblem is what the read says of the identity controls: more
// in force than MaxWatched, or the overflow field live; nil otherwise.
func (s *State) IdentityProblem() error {
	switch {
	case s.Identities > MaxWatched:
		return fmt.Errorf("identity controls: %w: %d in force, more than the %d watched: every decision reads its identity's control", errs.ErrTooMany, s.Identities, MaxWatched)
	case s.OverflowUntil > 0:
		return fmt.Errorf("identity controls: %w: controls past the %d watched are in force until %s: every decision reads its identity's control", errs.ErrTooMany, MaxWatched, overflowEnd(s.OverflowUntil))
	}
	return nil
}

// overflowEnd formats the overflow field's end for an error.
func overflowEnd(us int64) string {
	if us == math.MaxInt64 {
		return "an end that cannot be read"
	}
	return time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
}

// Clock is the watch's time: Options.Now, or this process's clock.
func (w *Watch) Clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

// ForDecision returns the list a decision uses, reading the hash first
// when the list is older than Propagation and no read is in flight; a
// decision never waits for another's read. The read is bounded by ctx,
// the decision's own budget; a failed read keeps the last list, and the
// next read is an interval later.
func (w *Watch) ForDecision(ctx context.Context) *State {
	w.mu.Lock()
	now := w.Clock()
	if w.inflight != nil || (!w.readAt.IsZero() && now.Sub(w.readAt) < Propagation && !now.Before(w.readAt)) {
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

// ForCache returns the list a controls.NetworkControlCache serves at its
// interval, and whether this call read the hash, with that read's error
// (wrapping ErrUnavailable; the last good list is returned with it).
// When the list is older than interval, the call reads (within timeout,
// whatever ctx's deadline, so that a caller's short deadline does not
// leave the process without controls); a concurrent call meanwhile
// answers the last list without waiting, except before the first read has
// succeeded, when it waits for that read (or ctx).
func (w *Watch) ForCache(ctx context.Context, interval, timeout time.Duration) (*State, bool, error) {
	for {
		w.mu.Lock()
		now := w.Clock()
		last := w.last
		fresh := last != nil && now.Sub(w.readAt) < interval && !now.Before(w.readAt)
		if fresh || (w.inflight != nil && last != nil) {
			w.mu.Unlock()
			return last, false, nil
		}
		if wait := w.inflight; wait != nil {
			// No list yet: wait for the first read rather than answer
			// an empty one.
			w.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, false, fmt.Errorf("network controls: %w: %w", errs.ErrUnavailable, ctx.Err())
			}
		}
		done := make(chan struct{})
		w.inflight, w.readAt = done, now
		w.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		s, err := w.refresh(rctx, now, done)
		cancel()
		return s, true, err
	}
}

// refresh reads the hash at now and publishes the list, then wakes the
// waiters. It returns the last good list (the new one when the read
// succeeded) and the read's error.
func (w *Watch) refresh(ctx context.Context, now time.Time, done chan struct{}) (*State, error) {
	s, err := w.Read(ctx, now)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight = nil
	close(done)
	if s != nil {
		w.last = s
		return s, nil
	}
	return w.last, err
}

// Invalidate makes the next use read the hash again (for tests that write
// the hash directly).
func (w *Watch) Invalidate() {
	w.mu.Lock()
	w.readAt = time.Time{}
	w.mu.Unlock()
}

// Report is what a watch holds, for tests.
type Report struct {
	// Loaded is true once a read of the controls has succeeded. Until
	// then every decision of a Limiter with Options.Controls reads its
	// identity's control key.
	Loaded bool
	// ReadAt is when the last good read started.
	ReadAt time.Time
	// Identities is how many identity controls were in force at that read.
	Identities int
	// Kept is how many of their tags the watch keeps (none in overflow).
	Kept int
	// Overflow is true when Identities passed MaxWatched, or the hash's
	// overflow field was live (OverflowUntil): the process keeps no tag,
	// and every decision reads its identity's control key until a read
	// finds neither.
	Overflow bool
	// OverflowUntil is the end of the overflow field at that read: the
	// latest end of the identity controls Store.Set could not mirror by
	// tag (MaxWatched fields were live); the largest time UnixMicro gives
	// when its end could not be read (the strictest reading). Zero when it
	// was not live. Lifting a control never brings it earlier: the process
	// leaves overflow at its first read after it, when the fields left are
	// within the bound.
	OverflowUntil time.Time
}

// Report reports this process's copy of the controls in force. It does
// not contact Redis.
func (w *Watch) Report() Report {
	w.mu.Lock()
	s := w.last
	w.mu.Unlock()
	if s == nil {
		return Report{}
	}
	st := Report{Loaded: true, ReadAt: s.ReadAt, Identities: s.Identities, Kept: len(s.tags), Overflow: s.Overflow}
	if s.OverflowUntil > 0 {
		st.OverflowUntil = time.UnixMicro(s.OverflowUntil)
	}
	return st
}

// Read reads the hash at now (one HGETALL), without publishing it. A
// failure to read is ErrUnavailable, with no state.
func (w *Watch) Read(ctx context.Context, now time.Time) (*State, error) {
	fields, err := w.client.HGetAll(ctx, w.key).Result()
	if err != nil {
		return nil, fmt.Errorf("network controls: %w: %w", errs.ErrUnavailable, err)
	}
	return ReadFields(fields, now), nil
}

// ReadFields reads the identity fields of the hash at now: the tags in
// force, with their ends (at most MaxWatched+1 of them), how many
// identity fields are in force, the end of the overflow field ("i:*",
// Unix µs) when it is in force, and how many could not be read. An
// identity field whose end cannot be read is counted as malformed and
// kept with no end (its identity's control key is read: the strictest
// reading); an overflow field whose end cannot be read is counted as
// malformed and in force with no end (every control key is read). The
// network fields are left to package controls, in Fields.
func ReadFields(fields map[string]string, now time.Time) *State {
	s := &State{ReadAt: now, Fields: fields}
	var tags map[string]int64
	nowUs := now.UnixMicro()
	for field, rec := range fields {
		tag, ok := IsIdentityField(field)
		if !ok {
			continue
		}
		if tag == "" {
			s.Malformed++
			continue
		}
		end, err := ParseDigits(rec)
		if err != nil {
			s.Malformed++
			end = math.MaxInt64
		} else if end <= nowUs {
			continue
		}
		if field == OverflowField {
			s.OverflowUntil = end
			continue
		}
		s.Identities++
		if tags == nil {
			tags = make(map[string]int64)
		}
		if len(tags) <= MaxWatched {
			tags[tag] = end
		}
	}
	if s.Identities > MaxWatched || s.OverflowUntil > 0 {
		s.Overflow = true
	} else {
		s.tags = tags
	}
	return s
}
