package ratelimit

import (
	"errors"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

func TestControlRecordRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_123)
	for _, c := range []controls.Control{
		{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "credential stuffing", SetBy: "arn:aws:iam::123456789012:user/ops", SetAt: now},
		{Kind: controls.Exempt, Until: now.Add(controls.MaxDuration), Reason: "monitor", SetAt: now},
		{Kind: controls.Scale, Factor: 10, Until: now.Add(time.Minute), Reason: "launch \"day\" {x}", SetAt: now},
		{Kind: controls.Scale, Factor: 0.001, Until: now.Add(time.Minute), Reason: "suspect", SetAt: now},
	} {
		if err := c.Validate(now); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		rec := formatControlRecord(c)
		got, err := parseControlRecord(rec)
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
		if _, err := parseControlRecord(rec); !errors.Is(err, controls.ErrMalformed) {
			t.Errorf("parse %q = %v, want a malformed-record error", rec, err)
		}
	}
}

func TestScaledCount(t *testing.T) {
	for _, tc := range []struct{ count, milli, want int64 }{
		{30, 10000, 300}, {30, 100, 3}, {30, 1, 1}, {7, 1500, 10}, {MaxCount, 1000000, MaxCount},
	} {
		if got := scaledCount(tc.count, tc.milli); got != tc.want {
			t.Errorf("scaledCount(%d, %d) = %d, want %d", tc.count, tc.milli, got, tc.want)
		}
	}
}
