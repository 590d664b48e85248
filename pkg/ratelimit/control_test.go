package ratelimit

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestControlRecordRoundTrip(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_123)
	for _, c := range []Control{
		{Kind: ControlBlock, Until: now.Add(time.Hour), Reason: "credential stuffing", SetBy: "arn:aws:iam::123456789012:user/ops", SetAt: now},
		{Kind: ControlExempt, Until: now.Add(MaxControlDuration), Reason: "monitor", SetAt: now},
		{Kind: ControlScale, Factor: 10, Until: now.Add(time.Minute), Reason: "launch \"day\" {x}", SetAt: now},
		{Kind: ControlScale, Factor: 0.001, Until: now.Add(time.Minute), Reason: "suspect", SetAt: now},
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

func TestControlValidateRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ok := Control{Kind: ControlBlock, Until: now.Add(time.Hour), Reason: "r"}
	for name, c := range map[string]Control{
		"no kind":          {Until: ok.Until, Reason: "r"},
		"ended":            {Kind: ControlBlock, Until: now, Reason: "r"},
		"too long":         {Kind: ControlBlock, Until: now.Add(MaxControlDuration + time.Second), Reason: "r"},
		"no reason":        {Kind: ControlBlock, Until: ok.Until, Reason: "  "},
		"long reason":      {Kind: ControlBlock, Until: ok.Until, Reason: strings.Repeat("x", MaxControlReason+1)},
		"newline":          {Kind: ControlBlock, Until: ok.Until, Reason: "a\nb"},
		"bad utf-8":        {Kind: ControlBlock, Until: ok.Until, Reason: "a\xffb"},
		"factor on block":  {Kind: ControlBlock, Factor: 2, Until: ok.Until, Reason: "r"},
		"scale 0":          {Kind: ControlScale, Until: ok.Until, Reason: "r"},
		"scale too big":    {Kind: ControlScale, Factor: 1001, Until: ok.Until, Reason: "r"},
		"scale 4 decimals": {Kind: ControlScale, Factor: 1.0005, Until: ok.Until, Reason: "r"},
	} {
		if err := c.Validate(now); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
	if err := ok.Validate(now); err != nil {
		t.Fatal(err)
	}
}

func TestParseControlRecordRefusesWhatTheScriptsWouldNotRead(t *testing.T) {
	for _, rec := range []string{
		"", "v1", "v2 b 1 0 {}", "v1 x 1 0 {}", "v1 b -1 0 {}", "v1 b 1.5 0 {}",
		"v1 b 12345678901234567 0 {}", "v1 s 1 0 {}", "v1 s 1 1000001 {}", "v1 b 1 0 not-json", "v1  b 1 0 {}",
	} {
		if _, err := parseControlRecord(rec); !errors.Is(err, errMalformedControl) {
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
