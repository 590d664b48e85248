package ratelimit

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// TestParseNetworkControlsReadsIdentityFields: "i:<tag>" fields are the
// watched identities, not malformed networks; an ended one is left out, one
// whose end cannot be read is counted malformed and watched with no end.
func TestParseNetworkControlsReadsIdentityFields(t *testing.T) {
	now := controlsT0
	us := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMicro(), 10) }
	fields := map[string]string{
		"i:live":         us(time.Hour),
		"i:ended":        us(-time.Second),
		"i:now":          us(0),
		"i:garbage":      "soon",
		"i:":             us(time.Hour),
		"203.0.113.0/24": formatControlRecord(controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "r"}),
		"not-a-network":  "v1 b 1 0 {}",
	}
	list, tags, identities, overflowUntil, malformed := parseNetworkControls(fields, now)
	if overflowUntil != 0 {
		t.Fatalf("overflow until %d with no overflow field", overflowUntil)
	}
	if len(list) != 1 || list[0].Prefix.String() != "203.0.113.0/24" {
		t.Fatalf("networks %+v", list)
	}
	if identities != 2 || len(tags) != 2 || tags["live"] != now.Add(time.Hour).UnixMicro() || tags["garbage"] != math.MaxInt64 {
		t.Fatalf("tags %v (%d in force)", tags, identities)
	}
	// "i:garbage", "i:" and "not-a-network".
	if malformed != 3 {
		t.Fatalf("%d malformed, want 3", malformed)
	}
	s := &watchState{readAt: now, tags: tags}
	for tag, want := range map[string]bool{"live": true, "garbage": true, "ended": false, "other": false} {
		if got := s.controlled(tag, now); got != want {
			t.Errorf("controlled(%q) = %v, want %v", tag, got, want)
		}
	}
	// Past a listed end, read until the list is read again.
	if !s.controlled("live", now.Add(2*time.Hour)) {
		t.Error("a listed control past its end, before the next read: not read")
	}
	if s := (&watchState{readAt: now.Add(2 * time.Hour), tags: tags}); s.controlled("live", now.Add(2*time.Hour)) {
		t.Error("a control listed as ended at its read: still read")
	}
	var none *watchState
	if !none.controlled("x", now) || (&watchState{overflow: true}).controlled("x", now) != true {
		t.Error("no list, or overflow: every identity must be read")
	}
}

// FuzzParseNetworkControls: any field and value parse without a panic;
// every field is a network, a watched identity, ended or malformed (an
// identity field with an unreadable end is both watched and malformed).
func FuzzParseNetworkControls(f *testing.F) {
	f.Add("i:tag", "1900000000000000")
	f.Add("i:", "")
	f.Add("10.0.0.0/8", "v1 b 1900000000000000 0 {}")
	f.Add("i:x", "99999999999999999")
	f.Add("i:*", "1900000000000000")
	f.Fuzz(func(t *testing.T, field, value string) {
		list, tags, identities, overflowUntil, malformed := parseNetworkControls(map[string]string{field: value}, controlsT0)
		if overflowUntil != 0 && (field != overflowField || identities != 0 || len(list) != 0) {
			t.Fatalf("%q=%q: overflow until %d", field, value, overflowUntil)
		}
		if len(list)+identities > 1 || len(list)+malformed > 1 || len(tags) != identities {
			t.Fatalf("%q=%q: %d networks, %d identities (%d tags), %d malformed", field, value, len(list), identities, len(tags), malformed)
		}
		if identities == 1 && !strings.HasPrefix(field, identityFieldPrefix) {
			t.Fatalf("%q read as an identity", field)
		}
	})
}

// TestParseNetworkControlsReadsTheOverflowField: "i:*" is no identity: a
// live one is the overflow's end, an ended one nothing, one whose end
// cannot be read is malformed and in force with no end (every control key
// read); the watch state is in overflow for the first and the last.
func TestParseNetworkControlsReadsTheOverflowField(t *testing.T) {
	now := controlsT0
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
		_, tags, identities, until, malformed := parseNetworkControls(map[string]string{overflowField: tc.value, "i:live": us(time.Hour)}, now)
		if until != tc.until || malformed != tc.malformed || identities != 1 || len(tags) != 1 || tags["live"] == 0 {
			t.Errorf("%q: overflow until %d, %d malformed, %d identities, tags %v; want %d, %d, 1, [live]", tc.value, until, malformed, identities, tags, tc.until, tc.malformed)
		}
	}
}
