package ratelimit

import (
	"strconv"
	"testing"
	"time"
)

// TestFallbackFloodKeepsASpentIdentity: once an identity has spent its
// fallback share, a flood of maxEntries*10 new identities, each admitted
// one request, does not give it a fresh share: eviction forgets the least
// spent buckets first.
func TestFallbackFloodKeepsASpentIdentity(t *testing.T) {
	const maxEntries = 100
	limit := Limit{Name: "anonymous", Count: 100, Window: time.Minute} // local share: 100/10 = 10
	cases := []struct {
		name string
		// step is how far the clock moves between two flood requests.
		step time.Duration
		// floodLimit is the limit of the throwaway identities.
		floodLimit Limit
	}{
		{"flood at one instant, same limit", 0, limit},
		{"flood over 2 s, same limit", 2 * time.Millisecond, limit},
		{"flood on a limit with a longer window", 0, Limit{Name: "org", Count: 1000, Window: time.Hour}},
		{"flood on a limit with a shorter window", 0, Limit{Name: "burst", Count: 100, Window: 2 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			f := newFallbackLimiter(10, maxEntries, func() time.Time { return now })
			victim := []Check{{Identity: "ip:203.0.113.9", Limit: limit}}
			admitted := 0
			for range 20 {
				if f.decide(1, true, victim).Allowed {
					admitted++
				}
			}
			if admitted != 10 {
				t.Fatalf("victim admitted %d before the flood, want its local share 10", admitted)
			}
			for i := range maxEntries * 10 {
				now = now.Add(tc.step)
				res := f.decide(1, true, []Check{{Identity: "ip:flood-" + strconv.Itoa(i), Limit: tc.floodLimit}})
				if !res.Allowed {
					t.Fatalf("flood identity %d denied: %+v", i, res)
				}
				if len(f.buckets) > maxEntries {
					t.Fatalf("fallback holds %d entries, bound %d", len(f.buckets), maxEntries)
				}
			}
			res := f.decide(1, true, victim)
			if res.Allowed {
				t.Fatalf("the spent identity was admitted after a flood of %d new identities: its share was reset", maxEntries*10)
			}
			if ra := res.RetryAfter(); ra <= 0 || ra > limit.Window {
				t.Errorf("RetryAfter = %v, want within (0, %v]", ra, limit.Window)
			}
		})
	}
}

// TestFallbackEvictsLeastSpent pins the eviction order on a full fallback:
// expired buckets first, then the least spent fraction of their share,
// down to three quarters of the bound.
func TestFallbackEvictsLeastSpent(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := newFallbackLimiter(1, 16, func() time.Time { return now })
	limit := Limit{Name: "l", Count: 16, Window: 16 * time.Second} // interval 1 s
	// Identity i has spent i+1 of 16: TAT now+(i+1) s.
	for i := range 16 {
		if !f.decide(int64(i+1), true, []Check{{Identity: strconv.Itoa(i), Limit: limit}}).Allowed {
			t.Fatalf("identity %d denied", i)
		}
	}
	// The next new identity finds the fallback full: 16 - 12 = 4 entries
	// go, the four least spent (identities 0..3), and the new one enters.
	f.decide(1, true, []Check{{Identity: "new", Limit: limit}})
	if len(f.buckets) != 13 {
		t.Fatalf("%d entries after eviction, want 12 + the new one", len(f.buckets))
	}
	for i := range 16 {
		_, kept := f.buckets[newFallbackKey(Check{Identity: strconv.Itoa(i), Limit: limit}, f.hashKey)]
		if kept != (i >= 4) {
			t.Errorf("identity %d (spent %d/16): kept = %v, want %v", i, i+1, kept, i >= 4)
		}
	}
}

// TestFallbackShadowChecks: the fallback treats a shadow check as the
// scripts do. It never denies; it spends only on an admitted request that
// it admits on its own; a denied request spends nothing on it.
func TestFallbackShadowChecks(t *testing.T) {
	tier := Limit{Name: "tier", Count: 100, Window: time.Minute}
	trial := Limit{Name: "trial", Count: 3, Window: time.Minute}
	strict := Limit{Name: "strict", Count: 2, Window: time.Minute}
	cases := []struct {
		name   string
		checks []Check
		// allowed and shadowAllowed are what each of 6 requests at one
		// instant answers: the result, and the shadow check's decision.
		allowed, shadowAllowed string
		// shadowLeft is what the shadow limit has left afterwards, peeked
		// as an enforced check.
		shadowLeft int64
	}{
		{"a lone shadow check", []Check{{Identity: "a", Limit: trial, Shadow: true}}, "++++++", "+++---", 0},
		{"a shadow check next to an enforced one", []Check{{Identity: "b", Limit: tier}, {Identity: "b", Limit: trial, Shadow: true}}, "++++++", "+++---", 0},
		{"an enforced denial spends nothing on the shadow", []Check{{Identity: "c", Limit: strict}, {Identity: "c", Limit: trial, Shadow: true}}, "++----", "++++++", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			f := newFallbackLimiter(1, 100, func() time.Time { return now })
			shadowAt := len(tc.checks) - 1
			for i := range 6 {
				res := f.decide(1, true, tc.checks)
				d := res.Decisions[shadowAt]
				if res.Allowed != (tc.allowed[i] == '+') || d.Allowed != (tc.shadowAllowed[i] == '+') || !d.Shadow {
					t.Fatalf("request %d: allowed=%v, shadow decision %+v; want %c %c", i+1, res.Allowed, d, tc.allowed[i], tc.shadowAllowed[i])
				}
				if !d.Allowed && d.RetryAfter <= 0 {
					t.Fatalf("request %d: a shadow denial without RetryAfter", i+1)
				}
			}
			peek := f.decide(1, false, []Check{{Identity: tc.checks[shadowAt].Identity, Limit: trial}})
			if got := peek.Decisions[0].Remaining; got != tc.shadowLeft {
				t.Fatalf("the shadow limit has %d left, want %d", got, tc.shadowLeft)
			}
		})
	}
}
