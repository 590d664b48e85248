package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTwoChecksOnOneKeyAreInvalid: a limit checked twice for one identity
// would spend twice on one counter; Decide, Peek and the Gate refuse it
// before any Redis call (the limiter's Redis refuses every connection, so
// anything but ErrInvalid would be ErrUnavailable or a fallback answer).
func TestTwoChecksOnOneKeyAreInvalid(t *testing.T) {
	ctx := context.Background()
	l := refusedLimiter(t)
	gate := newGate(l, GateOptions{}, time.Now)
	items := Limit{Name: "GET /v1/items", Count: 10, Window: time.Minute, Algorithm: FixedWindow}
	auth := Limit{Name: "POST /auth/*", Count: 5, Window: time.Minute, Algorithm: SlidingLog}
	// The same name, algorithm and window is one key whatever the count
	// (issue 38): refused too.
	recounted := Limit{Name: items.Name, Count: 9, Window: time.Minute, Algorithm: FixedWindow}
	for _, dup := range [][]Check{
		{{Identity: "ip:203.0.113.7", Limit: auth}, {Identity: "ip:203.0.113.7", Limit: items}, {Identity: "ip:203.0.113.7", Limit: items, Shadow: true}},
		{{Identity: "ip:203.0.113.7", Limit: items}, {Identity: "ip:203.0.113.7", Limit: recounted}},
	} {
		calls := map[string]func() error{
			"Limiter.Decide": func() error { _, err := l.Decide(ctx, 1, dup...); return err },
			"Limiter.peek":   func() error { _, err := l.peek(ctx, 1, dup...); return err },
			"Gate.Decide":    func() error { _, err := gate.Decide(ctx, 1, FailOpen, dup...); return err },
			"Gate.Peek":      func() error { _, err := gate.Peek(ctx, 1, dup...); return err },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s with a limit checked twice: %v, want ErrInvalid", name, err)
			}
		}
	}
	// Not one key: another identity, or the same name with another window
	// or algorithm.
	other := []Check{
		{Identity: "ip:203.0.113.7", Limit: items},
		{Identity: "ip:203.0.113.8", Limit: items},
		{Identity: "ip:203.0.113.7", Limit: Limit{Name: items.Name, Count: 10, Window: time.Hour, Algorithm: FixedWindow}},
		{Identity: "ip:203.0.113.7", Limit: Limit{Name: items.Name, Count: 10, Window: time.Minute, Algorithm: SlidingLog}},
	}
	if _, err := gate.Decide(ctx, 1, FailOpen, other...); err != nil {
		t.Errorf("distinct keys: %v, want the fallback's answer", err)
	}
}
