package config

import (
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestRestartWarnings: a changed count keeps a limit's counts and is not
// named; a changed window or algorithm starts them afresh and is.
func TestRestartWarnings(t *testing.T) {
	anon := func(count int64, window time.Duration, alg ratelimit.Algorithm) *Limits {
		return &Limits{
			Tiers: Tiers{Anonymous: LimitList{{Limit: ratelimit.Limit{Name: "anonymous", Count: count, Window: window, Algorithm: alg}}}},
			Quota: OwnedLimit{Limit: ratelimit.Limit{Name: "quota", Count: 10, Window: time.Minute}},
		}
	}
	from := anon(30, time.Hour, ratelimit.SlidingWindow)
	for _, tt := range []struct {
		name string
		to   *Limits
		warn bool
	}{
		{"the same", anon(30, time.Hour, ratelimit.SlidingWindow), false},
		{"a tightened count", anon(10, time.Hour, ratelimit.SlidingWindow), false},
		{"a loosened count", anon(300, time.Hour, ratelimit.SlidingWindow), false},
		{"another window", anon(30, time.Minute, ratelimit.SlidingWindow), true},
		{"another algorithm", anon(30, time.Hour, ratelimit.SlidingLog), true},
	} {
		got := RestartWarnings(from, tt.to)
		if tt.warn != (len(got) == 1) || len(got) > 1 {
			t.Errorf("%s: %q, want a warning: %v", tt.name, got, tt.warn)
		}
		if len(got) == 1 && !strings.Contains(got[0], `limit "anonymous"`) {
			t.Errorf("%s: %q does not name the limit", tt.name, got[0])
		}
	}
}
