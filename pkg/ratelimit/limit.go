package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Algorithm names a rate-limiting algorithm. The zero value means
// [SlidingWindow]. Any other value not among [Algorithms] is invalid:
// [Limit.Validate] reports it, and a decision on it fails with [ErrInvalid].
type Algorithm string

// The algorithms. Their values are stable names, suitable for
// configuration files and logs; [Limit.String] shows them.
const (
	SlidingWindow  Algorithm = "sliding-window"
	SlidingLog     Algorithm = "sliding-log"
	TokenBucket    Algorithm = "token-bucket"
	LeakyBucket    Algorithm = "leaky-bucket"
	FixedWindow    Algorithm = "fixed-window"
	SlidingBuckets Algorithm = "sliding-buckets"
)

// Algorithms returns every supported algorithm, the default first. The
// slice is the caller's: changing it changes nothing here.
func Algorithms() []Algorithm {
	return []Algorithm{SlidingWindow, SlidingLog, TokenBucket, LeakyBucket, FixedWindow, SlidingBuckets}
}

// parseAlgorithm returns the algorithm spelled s. An empty s is the
// default, SlidingWindow.
func parseAlgorithm(s string) (Algorithm, error) {
	if s == "" {
		return SlidingWindow, nil
	}
	for _, a := range Algorithms() {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown rate-limit algorithm %q (want one of %s)", truncate(s, 64), algorithmNames())
}

// algorithmNames lists every algorithm, for error messages.
func algorithmNames() string {
	names := make([]string, 0, len(Algorithms()))
	for _, a := range Algorithms() {
		names = append(names, string(a))
	}
	return strings.Join(names, ", ")
}

// orDefault resolves the zero value.
func (a Algorithm) orDefault() Algorithm {
	if a == "" {
		return SlidingWindow
	}
	return a
}

// Bounds of a [Limit]: its Count is from 1 to MaxCount, its Window from one
// millisecond to MaxWindow. Some algorithms bound count x window further
// (see Limit). They are constants, so a configuration layer can check and
// report them in its own terms before it builds a Limit.
const (
	MaxCount  = 1_000_000
	MaxWindow = 366 * 24 * time.Hour
)

// minWindow is the shortest window: windows are whole milliseconds, so that
// key expiry (PEXPIRE) and window edges agree. maxCountWindow bounds count x
// window, in the unit each algorithm computes in (checkScale): the scripts
// compute with Lua numbers (doubles), exact only below 2^53.
const (
	minWindow      = time.Millisecond
	maxCountWindow = 1 << 50
)

// checkScale reports a count and window whose products the algorithm's
// script cannot compute exactly. The sliding window decides a long limit in
// milliseconds (see millisecondClock), so its bound is on count x window in
// milliseconds; the fixed window compares counts only and has no bound; the
// algorithms that keep time stamps in microseconds keep the bound on count
// x window in microseconds.
func checkScale(count int64, window time.Duration, a Algorithm) error {
	switch a.orDefault() {
	case FixedWindow:
		return nil
	case SlidingWindow:
		if ms := window.Milliseconds(); ms > 0 && count > maxCountWindow/ms {
			return fmt.Errorf("count %d per %s is too large for %s to compute exactly (count x window in milliseconds must stay below 2^50); use a shorter window", count, formatWindow(window), SlidingWindow)
		}
		return nil
	}
	if us := window.Microseconds(); us > 0 && count > maxCountWindow/us {
		return fmt.Errorf("count %d per %s is too large for %s to compute exactly (count x window in microseconds must stay below 2^50); use a shorter window, or %s or %s", count, formatWindow(window), a, SlidingWindow, FixedWindow)
	}
	return nil
}

// millisecondClock reports whether the sliding-window script decides l on
// the millisecond clock: when count x window in microseconds passes 2^50,
// the bound under which the microsecond products are exact. It depends on
// the count and window only, so the script's caller and the decoder of its
// reply agree on it without asking each other.
func millisecondClock(l Limit) bool {
	us := l.Window.Microseconds()
	return l.Algorithm.orDefault() == SlidingWindow && us > 0 && l.Count > maxCountWindow/us
}

// Limit is a budget of Count units per Window for one identity.
//
// Count is from 1 to 1,000,000. Window is a whole number of milliseconds
// from 1ms to 366 days (key expiry, PEXPIRE, and window edges then agree).
// The scripts compute in exact integers on Lua numbers (doubles), which
// bounds count x window per algorithm:
//
//   - SlidingWindow: count x window in milliseconds may not exceed 2^50
//     (1,000,000/1d, 100,000/30d and 10,000/366d are limits; 1,000,000/30d
//     is not). A limit whose count x window in microseconds passes 2^50
//     (100,000/1d, not 10,000/1d) is decided on a millisecond clock: the
//     weight of its previous window steps each millisecond (never below
//     the exact weight), and its Retry-After is the exact wait until that
//     clock admits, so it is never early and at most 1ms late.
//   - FixedWindow: no bound beyond count and window.
//   - SlidingLog, TokenBucket, LeakyBucket, SlidingBuckets: count x window
//     in microseconds may not exceed 2^50 (10,000/1d or 1,000,000/18m, not
//     100,000/1d).
//
// Validate and every decision enforce these bounds.
type Limit struct {
	// Name is the policy name: it appears in the RateLimit headers and in the
	// Redis key, e.g. "anonymous", "user", "org" or a route limit's name.
	Name string
	// Count is how many units fit in one Window.
	Count int64
	// Window is the length of the (rolling, or for FixedWindow aligned)
	// window.
	Window time.Duration
	// Algorithm decides how the budget refills; the zero value is
	// SlidingWindow.
	Algorithm Algorithm
}

// String renders the limit in the configuration syntax, e.g. "30/1m".
func (l Limit) String() string {
	return strconv.FormatInt(l.Count, 10) + "/" + formatWindow(l.Window)
}

// Burst is the most units the limit can admit at one instant: 1 for
// LeakyBucket, Count for every other algorithm.
func (l Limit) Burst() int64 {
	if l.Algorithm.orDefault() == LeakyBucket {
		return 1
	}
	return l.Count
}

// Validate reports whether the limit can be enforced.
func (l Limit) Validate() error {
	if l.Count < 1 || l.Count > MaxCount {
		return fmt.Errorf("limit %q: count %d out of range 1..%d", l.Name, l.Count, MaxCount)
	}
	if l.Window < minWindow || l.Window > MaxWindow || l.Window%time.Millisecond != 0 {
		return fmt.Errorf("limit %q: window %s must be whole milliseconds between %s and %s", l.Name, l.Window, minWindow, MaxWindow)
	}
	if _, err := parseAlgorithm(string(l.Algorithm)); err != nil {
		return fmt.Errorf("limit %q: %w", l.Name, err)
	}
	if err := checkScale(l.Count, l.Window, l.Algorithm); err != nil {
		return fmt.Errorf("limit %q: %w", l.Name, err)
	}
	return nil
}

// formatWindow writes a window compactly: "1m" rather than "1m0s".
func formatWindow(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	default:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	}
}

// truncate shortens untrusted text before it goes into an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
