package ctlstore

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 10, 0, time.UTC)

// TestReadFieldsReadsIdentityFields: "i:<tag>" fields are the watched
// identities, not malformed networks; an ended one is left out, one whose
// end cannot be read is counted malformed and watched with no end. The
// network fields are left to package controls (its networksOf test).
func TestReadFieldsReadsIdentityFields(t *testing.T) {
	now := t0
	us := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMicro(), 10) }
	fields := map[string]string{
		"i:live":         us(time.Hour),
		"i:ended":        us(-time.Second),
		"i:now":          us(0),
		"i:garbage":      "soon",
		"i:":             us(time.Hour),
		"203.0.113.0/24": FormatRecord(Record{Kind: 'b', Until: now.Add(time.Hour).UnixMicro(), Reason: "r"}),
		"not-a-network":  "v1 b 1 0 {}",
	}
	st := ReadFields(fields, now)
	if st.OverflowUntil != 0 || st.Overflow {
		t.Fatalf("overflow until %d with no overflow field", st.OverflowUntil)
	}
	tags := st.tags
	if st.Identities != 2 || len(tags) != 2 || tags["live"] != now.Add(time.Hour).UnixMicro() || tags["garbage"] != math.MaxInt64 {
		t.Fatalf("tags %v (%d in force)", tags, st.Identities)
	}
	// "i:garbage" and "i:" ("not-a-network" is counted by package controls).
	if st.Malformed != 2 {
		t.Fatalf("%d malformed, want 2", st.Malformed)
	}
	s := &State{ReadAt: now, tags: tags}
	for tag, want := range map[string]bool{"live": true, "garbage": true, "ended": false, "other": false} {
		if got := s.Controlled(tag, now); got != want {
			t.Errorf("Controlled(%q) = %v, want %v", tag, got, want)
		}
	}
	// Past a listed end, read until the list is read again.
	if !s.Controlled("live", now.Add(2*time.Hour)) {
		t.Error("a listed control past its end, before the next read: not read")
	}
	if s := (&State{ReadAt: now.Add(2 * time.Hour), tags: tags}); s.Controlled("live", now.Add(2*time.Hour)) {
		t.Error("a control listed as ended at its read: still read")
	}
	var none *State
	if !none.Controlled("x", now) || (&State{Overflow: true}).Controlled("x", now) != true {
		t.Error("no list, or overflow: every identity must be read")
	}
}

// FuzzReadFields: any field and value read without a panic; every
// identity field is watched, ended or malformed (one with an unreadable end
// is both watched and malformed), and no other field is an identity.
func FuzzReadFields(f *testing.F) {
	f.Add("i:tag", "1900000000000000")
	f.Add("i:", "")
	f.Add("10.0.0.0/8", "v1 b 1900000000000000 0 {}")
	f.Add("i:x", "99999999999999999")
	f.Add("i:*", "1900000000000000")
	f.Fuzz(func(t *testing.T, field, value string) {
		st := ReadFields(map[string]string{field: value}, t0)
		if st.OverflowUntil != 0 && (field != OverflowField || st.Identities != 0) {
			t.Fatalf("%q=%q: overflow until %d", field, value, st.OverflowUntil)
		}
		if st.Identities > 1 || st.Malformed > 1 || (!st.Overflow && len(st.tags) != st.Identities) {
			t.Fatalf("%q=%q: %d identities (%d tags), %d malformed", field, value, st.Identities, len(st.tags), st.Malformed)
		}
		if (st.Identities == 1 || st.Malformed == 1) && !strings.HasPrefix(field, identityFieldPrefix) {
			t.Fatalf("%q read as an identity", field)
		}
	})
}

// TestReadFieldsReadsTheOverflowField: "i:*" is no identity: a live one
// is the overflow's end, an ended one nothing, one whose end cannot be read
// is malformed and in force with no end (every control key read); the
// watch state is in overflow for the first and the last.
func TestReadFieldsReadsTheOverflowField(t *testing.T) {
	now := t0
	us := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMicro(), 10) }
	for _, tc := range []struct {
		value     string
		until     int64
		malformed int
	}{
		{us(time.Hour), now.Add(time.Hour).UnixMicro(), 0},
		{us(0), 0, 0},
		{us(-time.Second), 0, 0},
		{"later", math.MaxInt64, 1},
	} {
		st := ReadFields(map[string]string{OverflowField: tc.value, "i:live": us(time.Hour)}, now)
		if st.OverflowUntil != tc.until || st.Malformed != tc.malformed || st.Identities != 1 || st.Overflow != (tc.until != 0) {
			t.Errorf("%q: overflow until %d, %d malformed, %d identities, overflow %v; want %d, %d, 1", tc.value, st.OverflowUntil, st.Malformed, st.Identities, st.Overflow, tc.until, tc.malformed)
		}
		if !st.Overflow && (len(st.tags) != 1 || st.tags["live"] == 0) {
			t.Errorf("%q: tags %v, want [live]", tc.value, st.tags)
		}
	}
}
