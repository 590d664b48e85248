package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkFallbackDecide is the fallback's hot path: one identity among a
// few, no eviction.
func BenchmarkFallbackDecide(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	f := newFallbackLimiter(10, defaultFallbackMaxEntries, func() time.Time { return now })
	checks := make([][]Check, 64)
	for i := range checks {
		checks[i] = []Check{{Identity: "ip:198.51.100." + strconv.Itoa(i), Limit: Limit{Name: "anonymous", Count: 1_000_000, Window: time.Hour}}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f.decide(1, true, checks[i%len(checks)])
	}
}

// BenchmarkFallbackFlood is a flood of new identities on a full fallback:
// every decision adds an entry, and evictions run at the bound.
func BenchmarkFallbackFlood(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	f := newFallbackLimiter(10, defaultFallbackMaxEntries, func() time.Time { return now })
	ids := make([][]Check, 1<<16)
	for i := range ids {
		ids[i] = []Check{{Identity: "ip:flood-" + strconv.Itoa(i), Limit: Limit{Name: "anonymous", Count: 100, Window: time.Hour}}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f.decide(1, true, ids[i%len(ids)])
	}
}
