package controls

import (
	"errors"
	"testing"
	"time"
)

func TestControlRecordRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_123)
	for _, c := range []Control{
		{Kind: Block, Until: now.Add(time.Hour), Reason: "credential stuffing", SetBy: "arn:aws:iam::123456789012:user/ops", SetAt: now},
		{Kind: Exempt, Until: now.Add(MaxDuration), Reason: "monitor", SetAt: now},
		{Kind: Scale, Factor: 10, Until: now.Add(time.Minute), Reason: "launch \"day\" {x}", SetAt: now},
		{Kind: Scale, Factor: 0.001, Until: now.Add(time.Minute), Reason: "suspect", SetAt: now},
	} {
		if err := c.Validate(now); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		rec := formatRecord(c)
		got, err := parseRecord(rec)
		if err != nil {
			t.Fatalf("parse %q: %v", rec, err)
		}
		if got.Kind != c.Kind || got.Factor != c.Factor || !got.Until.Equal(c.Until) || got.Reason != c.Reason || got.SetBy != c.SetBy || !got.SetAt.Equal(c.SetAt) {
			t.Errorf("round trip of %+v gave %+v (record %q)", c, got, rec)
		}
	}
}

func TestParseControlRecordRefusesWhatTheScriptsWouldNotRead(t *testing.T) {
	for _, rec := range []string{
		"", "v1", "v2 b 1 0 {}", "v1 x 1 0 {}", "v1 b -1 0 {}", "v1 b 1.5 0 {}",
		"v1 b 12345678901234567 0 {}", "v1 s 1 0 {}", "v1 s 1 1000001 {}", "v1 b 1 0 not-json", "v1  b 1 0 {}",
	} {
		if _, err := parseRecord(rec); !errors.Is(err, ErrMalformed) {
			t.Errorf("parse %q = %v, want a malformed-record error", rec, err)
		}
	}
}
