package ratelimit

import (
	"strings"
	"testing"
	"time"
)

func TestParseAlgorithm(t *testing.T) {
	for _, a := range Algorithms() {
		got, err := parseAlgorithm(string(a))
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %q, %v", a, got, err)
		}
	}
	if got, err := parseAlgorithm(""); err != nil || got != SlidingWindow {
		t.Errorf("ParseAlgorithm(\"\") = %q, %v; want the default sliding-window", got, err)
	}
	for _, bad := range []string{"sliding_window", "SLIDING-WINDOW", "gcra", " token-bucket"} {
		if _, err := parseAlgorithm(bad); err == nil {
			t.Errorf("ParseAlgorithm(%q) accepted", bad)
		}
	}
}

func TestLimitBurstAndString(t *testing.T) {
	tests := []struct {
		limit Limit
		burst int64
		str   string
	}{
		{Limit{Count: 30, Window: time.Minute}, 30, "30/1m"},
		{Limit{Count: 30, Window: time.Minute, Algorithm: TokenBucket}, 30, "30/1m"},
		{Limit{Count: 30, Window: time.Minute, Algorithm: LeakyBucket}, 1, "30/1m"},
		{Limit{Count: 5, Window: 10 * time.Second, Algorithm: SlidingLog}, 5, "5/10s"},
		{Limit{Count: 10000, Window: time.Hour}, 10000, "10000/1h"},
		{Limit{Count: 3, Window: 1500 * time.Millisecond}, 3, "3/1500ms"},
	}
	for _, tt := range tests {
		if got := tt.limit.Burst(); got != tt.burst {
			t.Errorf("%+v Burst() = %d, want %d", tt.limit, got, tt.burst)
		}
		if got := tt.limit.String(); got != tt.str {
			t.Errorf("%+v String() = %q, want %q", tt.limit, got, tt.str)
		}
	}
}

func TestValidateRejectsUnenforceableRequests(t *testing.T) {
	ok := Limit{Name: "anonymous", Count: 10, Window: time.Minute}
	tests := []struct {
		name   string
		cost   int64
		checks []Check
	}{
		{"no checks", 1, nil},
		{"zero cost", 0, []Check{{Identity: "a", Limit: ok}}},
		{"negative cost", -3, []Check{{Identity: "a", Limit: ok}}},
		{"cost above count", 11, []Check{{Identity: "a", Limit: ok}}},
		{"cost above leaky burst", 2, []Check{{Identity: "a", Limit: Limit{Name: "x", Count: 10, Window: time.Minute, Algorithm: LeakyBucket}}}},
		{"zero count", 1, []Check{{Identity: "a", Limit: Limit{Name: "x", Window: time.Minute}}}},
		{"zero window", 1, []Check{{Identity: "a", Limit: Limit{Name: "x", Count: 1}}}},
		{"sub-millisecond window", 1, []Check{{Identity: "a", Limit: Limit{Name: "x", Count: 1, Window: time.Millisecond + 1}}}},
		{"unknown algorithm", 1, []Check{{Identity: "a", Limit: Limit{Name: "x", Count: 1, Window: time.Second, Algorithm: "magic"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validate(tt.cost, tt.checks); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if err := validate(10, []Check{{Identity: "a", Limit: ok}}); err != nil {
		t.Fatalf("cost equal to count rejected: %v", err)
	}
}

// TestValidateBoundsCountTimesWindowPerAlgorithm pins down which long limits
// each algorithm accepts: the scripts compute in exact integers on doubles,
// and the bound on count x window depends on what each one multiplies.
func TestValidateBoundsCountTimesWindowPerAlgorithm(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name   string
		count  int64
		window time.Duration
		// accepted lists the algorithms that accept the limit; every other
		// one must refuse it.
		accepted []Algorithm
	}{
		{"a daily quota of 10,000: within 2^50 us", 10000, day, Algorithms()},
		{"the largest exact microsecond product", 1000000, 18 * time.Minute, Algorithms()},
		{"one minute past it", 1000000, 19 * time.Minute, []Algorithm{SlidingWindow, FixedWindow}},
		{"a daily quota of 100,000", 100000, day, []Algorithm{SlidingWindow, FixedWindow}},
		{"a daily quota of 1,000,000", 1000000, day, []Algorithm{SlidingWindow, FixedWindow}},
		{"13 days of 1,000,000: below 2^50 ms", 1000000, 13 * day, []Algorithm{SlidingWindow, FixedWindow}},
		{"14 days of 1,000,000: past 2^50 ms", 1000000, 14 * day, []Algorithm{FixedWindow}},
		{"a month of 10,000", 10000, 30 * day, []Algorithm{SlidingWindow, FixedWindow}},
		{"a year of 10,000", 10000, 366 * day, []Algorithm{SlidingWindow, FixedWindow}},
		{"a year of 1,000,000", 1000000, 366 * day, []Algorithm{FixedWindow}},
	}
	for _, tt := range tests {
		for _, a := range Algorithms() {
			l := Limit{Name: "quota", Count: tt.count, Window: tt.window, Algorithm: a}
			want := false
			for _, ok := range tt.accepted {
				want = want || ok == a
			}
			err := l.Validate()
			if (err == nil) != want {
				t.Errorf("%s: %s %s: Validate() = %v, want accepted %v", tt.name, a, l, err, want)
				continue
			}
			if err != nil && (!strings.Contains(err.Error(), string(a)) || !strings.Contains(err.Error(), "2^50")) {
				t.Errorf("%s: %s: error %q names neither the algorithm nor the bound", tt.name, a, err)
			}
		}
	}
	// The default algorithm (the zero value) is the sliding window's rule.
	if err := (Limit{Name: "quota", Count: 1000000, Window: day}).Validate(); err != nil {
		t.Errorf("1000000/1d in the default algorithm: %v", err)
	}
}

func TestMillisecondClockOnlyForLongSlidingWindows(t *testing.T) {
	tests := []struct {
		limit Limit
		want  bool
	}{
		{Limit{Count: 10000, Window: 24 * time.Hour}, false},
		{Limit{Count: 1000000, Window: 18 * time.Minute}, false},
		{Limit{Count: 1000000, Window: 19 * time.Minute}, true},
		{Limit{Count: 100000, Window: 24 * time.Hour}, true},
		{Limit{Count: 100000, Window: 24 * time.Hour, Algorithm: SlidingWindow}, true},
		{Limit{Count: 100000, Window: 24 * time.Hour, Algorithm: FixedWindow}, false},
		{Limit{Count: 30, Window: time.Minute}, false},
	}
	for _, tt := range tests {
		if got := millisecondClock(tt.limit); got != tt.want {
			t.Errorf("millisecondClock(%s %s) = %v, want %v", tt.limit.Algorithm, tt.limit, got, tt.want)
		}
	}
}
