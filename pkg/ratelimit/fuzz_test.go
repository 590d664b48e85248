package ratelimit

import (
	"strings"
	"testing"
	"time"
)

// Fuzzers of everything in this package that parses or carries outside
// input. Seed corpora live in testdata/fuzz/<FuzzName>; `go test` runs the
// seeds, `go test -fuzz=FuzzX -fuzztime=1m ./pkg/ratelimit/` explores.

// FuzzParseAlgorithm: only the five names (and the empty default) parse.
func FuzzParseAlgorithm(f *testing.F) {
	for _, s := range []string{"", "sliding-window", "sliding-log", "token-bucket", "leaky-bucket", "fixed-window", "SLIDING-WINDOW", "sliding-window ", "gcra"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseAlgorithm(s)
		if err != nil {
			return
		}
		known := s == "" && a == SlidingWindow
		for _, k := range Algorithms() {
			known = known || (a == k && string(k) == s)
		}
		if !known {
			t.Fatalf("ParseAlgorithm(%q) = %q, not one of the algorithms", s, a)
		}
	})
}

// FuzzKeys: whatever the identity and the policy name, a key has exactly
// one hash tag, which is the identity's fixed-size hash: no caller can
// choose or split its slot, and two identities never share a tag by
// construction of the input.
func FuzzKeys(f *testing.F) {
	for _, s := range [][2]string{
		{"203.0.113.7", "anonymous"},
		{"{evil}", "{x}"},
		{"}{", "}}{{"},
		{"", ""},
		{"user\x00id", "name with spaces"},
		{strings.Repeat("{", 300), strings.Repeat("}", 300)},
	} {
		f.Add(s[0], s[1])
	}
	ks := keyspace{prefix: defaultKeyPrefix}
	f.Fuzz(func(t *testing.T, identity, name string) {
		tag := ks.identityTag(identity)
		if len(tag) != 22 || strings.ContainsAny(tag, "{}") {
			t.Fatalf("identity %q has tag %q, want 22 characters without braces", identity, tag)
		}
		key := ks.key(tag, Limit{Name: name, Count: 10, Window: time.Minute})
		if strings.Count(key, "{") != 1 || strings.Count(key, "}") != 1 {
			t.Fatalf("key %q has more than one brace pair", key)
		}
		open, end := strings.Index(key, "{"), strings.Index(key, "}")
		if end < open || key[open+1:end] != tag {
			t.Fatalf("key %q: hash tag is not the identity's %q", key, tag)
		}
		if strings.ContainsAny(key, " \r\n\t\x00") {
			t.Fatalf("key %q contains whitespace or NUL", key)
		}
	})
}

// FuzzCounterDecision feeds the counter scripts' reply values, as a broken
// or hostile server could send them, to the code that turns them into a
// Decision: whatever the value, it answers without panicking, Allowed
// follows the value's sign, and a well-formed value gives counts within
// the limit's range.
func FuzzCounterDecision(f *testing.F) {
	f.Add(int64(10), int64(60_000), int64(0), int64(1_764_590_000_123_456), int64(1), false)
	f.Add(int64(10), int64(60_000), int64(-1), int64(1_764_590_000_123_456), int64(1), true)
	f.Add(int64(1_000_000), int64(1_000), int64(-1<<63), int64(-1), int64(1_000_000), false)
	f.Add(int64(3), int64(1), int64(1<<62), int64(1<<62), int64(3), true)
	f.Fuzz(func(t *testing.T, count, windowMillis, v, nowUs, cost int64, fixed bool) {
		l := Limit{Name: "fuzz", Count: count, Window: time.Duration(windowMillis) * time.Millisecond}
		if fixed {
			l.Algorithm = FixedWindow
		}
		if l.Validate() != nil || cost < 1 || cost > count {
			return
		}
		d := counterDecision(l, v, nowUs, cost, true)
		if d.Allowed != (v >= 0) {
			t.Fatalf("value %d: Allowed = %v", v, d.Allowed)
		}
		x := v
		if x < 0 {
			x = -1 - x
		}
		if x < counterBase*counterBase && x%counterBase <= count && x/counterBase <= count && nowUs >= 0 {
			if d.Remaining < 0 || d.Remaining > count || d.ResetAfter < 0 || d.RetryAfter < 0 || d.ResetAfter > 2*l.Window || d.RetryAfter > 2*l.Window {
				t.Fatalf("value %d at %d: %+v", v, nowUs, d)
			}
		}
	})
}
