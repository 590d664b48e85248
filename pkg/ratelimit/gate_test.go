package ratelimit

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// refusedClient returns a client for a loopback port nothing listens on:
// every command fails with a refused connection, for real.
func refusedLimiter(t *testing.T) *Limiter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	client, err := NewClient(ClientConfig{URL: "redis://" + addr, Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	l, err := NewLimiter(client, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestGateFailsOpenToTheDividedLocalLimit(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	gate := NewGate(refusedLimiter(t), GateOptions{FallbackInstances: 10, Now: func() time.Time { return now }})
	check := Check{Identity: "198.51.100.3", Limit: Limit{Name: "anonymous", Count: 30, Window: time.Minute}}
	admitted := 0
	for range 10 {
		res, err := gate.Decide(context.Background(), 1, false, check)
		if err != nil {
			t.Fatalf("fail-open request got an error: %v", err)
		}
		if !res.Degraded || !res.Decisions[0].Degraded {
			t.Fatal("fallback decision not marked degraded")
		}
		if res.Allowed {
			admitted++
		} else if res.RetryAfter() <= 0 {
			t.Fatal("degraded denial without RetryAfter")
		}
	}
	if admitted != 3 {
		t.Fatalf("fallback admitted %d, want 30/10 = 3", admitted)
	}
	now = now.Add(20 * time.Second) // one local interval (60s/3)
	if res, _ := gate.Decide(context.Background(), 1, false, check); !res.Allowed {
		t.Fatal("fallback did not refill")
	}
}

func TestGateFailsClosed(t *testing.T) {
	gate := NewGate(refusedLimiter(t), GateOptions{})
	check := Check{Identity: "198.51.100.3", Limit: Limit{Name: "login", Count: 5, Window: time.Minute}}
	_, err := gate.Decide(context.Background(), 1, true, check)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("fail-closed request: err = %v, want ErrUnavailable", err)
	}
	if _, err := gate.Decide(context.Background(), 0, false, check); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid request: err = %v, want ErrInvalid even when failing open", err)
	}
}

func TestFallbackStaysBounded(t *testing.T) {
	f := newFallbackLimiter(10, 100, time.Now)
	for i := range 10000 {
		f.decide(1, true, []Check{{Identity: string(rune(i)) + "x", Limit: Limit{Name: "a", Count: 100, Window: time.Hour}}})
	}
	if len(f.buckets) > 100 {
		t.Fatalf("fallback holds %d entries, bound 100", len(f.buckets))
	}
}
