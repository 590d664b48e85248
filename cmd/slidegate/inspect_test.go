package main

import (
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestRateText: a limit is shown as the configuration writes it, days as
// days (Limit.String, which keys carry, says 24h).
func TestRateText(t *testing.T) {
	cases := []struct {
		limit ratelimit.Limit
		want  string
	}{
		{ratelimit.Limit{Count: 100000, Window: 24 * time.Hour}, "100000/1d"},
		{ratelimit.Limit{Count: 3, Window: 48 * time.Hour}, "3/2d"},
		{ratelimit.Limit{Count: 30, Window: time.Minute}, "30/1m"},
		{ratelimit.Limit{Count: 10, Window: 36 * time.Hour}, ratelimit.Limit{Count: 10, Window: 36 * time.Hour}.String()},
		{ratelimit.Limit{Count: 20, Window: time.Second}, "20/1s"},
	}
	for _, tc := range cases {
		if got := rateText(tc.limit); got != tc.want {
			t.Errorf("rateText(%d per %s) = %q, want %q", tc.limit.Count, tc.limit.Window, got, tc.want)
		}
	}
}
