package ratelimit

import "testing"

func TestScaledCount(t *testing.T) {
	for _, tc := range []struct{ count, milli, want int64 }{
		{30, 10000, 300}, {30, 100, 3}, {30, 1, 1}, {7, 1500, 10}, {MaxCount, 1000000, MaxCount},
	} {
		if got := scaledCount(tc.count, tc.milli); got != tc.want {
			t.Errorf("scaledCount(%d, %d) = %d, want %d", tc.count, tc.milli, got, tc.want)
		}
	}
}
