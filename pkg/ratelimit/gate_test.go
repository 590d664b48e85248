package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/faultproxy"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
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
	client, err := redisclient.New(redisclient.Config{URL: "redis://" + addr, Timeout: 50 * time.Millisecond})
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
	gate := newGate(refusedLimiter(t), GateOptions{FallbackInstances: 10}, func() time.Time { return now })
	check := Check{Identity: "198.51.100.3", Limit: Limit{Name: "anonymous", Count: 30, Window: time.Minute}}
	admitted := 0
	for range 10 {
		res, err := gate.Decide(context.Background(), 1, FailOpen, check)
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
	if res, _ := gate.Decide(context.Background(), 1, FailOpen, check); !res.Allowed {
		t.Fatal("fallback did not refill")
	}
}

func TestGateFailsClosed(t *testing.T) {
	gate := NewGate(refusedLimiter(t), GateOptions{})
	check := Check{Identity: "198.51.100.3", Limit: Limit{Name: "login", Count: 5, Window: time.Minute}}
	_, err := gate.Decide(context.Background(), 1, FailClosed, check)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("fail-closed request: err = %v, want ErrUnavailable", err)
	}
	if _, err := gate.Decide(context.Background(), 0, FailOpen, check); !errors.Is(err, ErrInvalid) {
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

// liveLimiter is a limiter on a real redis-server whose script clock is
// clock, so tests can stand exactly at the edges of a denial.
func liveLimiter(t *testing.T, server *redistest.Server, prefix string, clock *time.Time) *Limiter {
	t.Helper()
	client, err := redisclient.New(redisclient.Config{URL: server.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	l, err := NewLimiter(client, Options{KeyPrefix: prefix, Now: func() time.Time { return *clock }})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestDenyCacheDeniesFromMemoryUntilRedisWouldAdmit(t *testing.T) {
	server := redistest.StartServer(t)
	ctx := context.Background()
	for _, alg := range Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
			gate := NewGate(liveLimiter(t, server, "deny-"+string(alg), &clock), GateOptions{})
			check := Check{Identity: "203.0.113.9", Limit: Limit{Name: "user", Count: 3, Window: time.Minute, Algorithm: alg}}
			var denial Result
			for {
				res, err := gate.Decide(ctx, 1, FailOpen, check)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Allowed {
					denial = res
					break
				}
			}
			wait := denial.RetryAfter()
			calls := gate.stats().redisCalls

			clock = clock.Add(wait - time.Microsecond)
			res, err := gate.Decide(ctx, 1, FailOpen, check)
			if err != nil || res.Allowed {
				t.Fatalf("1µs before Retry-After: allowed=%v err=%v, want a denial", res.Allowed, err)
			}
			if got := gate.stats().redisCalls; got != calls {
				t.Fatalf("denial within Retry-After cost %d Redis calls, want 0", got-calls)
			}
			if got := res.RetryAfter(); got != time.Microsecond {
				t.Fatalf("cached denial says retry after %v, want the 1µs left", got)
			}
			if res.RedisLatency != 0 || res.Cause != nil {
				t.Fatalf("cached denial: RedisLatency %v, Cause %v; want neither, Redis was not asked", res.RedisLatency, res.Cause)
			}

			// Another identity is asked of Redis.
			other := check
			other.Identity = "203.0.113.10"
			if res, _ := gate.Decide(ctx, 1, FailOpen, other); !res.Allowed {
				t.Fatal("another identity was denied from the cache")
			}

			clock = clock.Add(time.Microsecond)
			res, err = gate.Decide(ctx, 1, FailOpen, check)
			if err != nil || !res.Allowed {
				t.Fatalf("at Retry-After: allowed=%v err=%v, want Redis to admit it", res.Allowed, err)
			}
		})
	}
}

func TestDenyCacheCanBeTurnedOff(t *testing.T) {
	server := redistest.StartServer(t)
	clock := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	gate := NewGate(liveLimiter(t, server, "nodeny", &clock), GateOptions{DenyCacheDisabled: true})
	check := Check{Identity: "203.0.113.9", Limit: Limit{Name: "user", Count: 1, Window: time.Minute}}
	for range 5 {
		if _, err := gate.Decide(context.Background(), 1, FailOpen, check); err != nil {
			t.Fatal(err)
		}
	}
	if s := gate.stats(); s.redisCalls != 5 || s.denyCacheHits != 0 {
		t.Fatalf("with the deny cache off: %+v, want 5 Redis calls and no hits", s)
	}
}

func TestDenyCacheAnchorsOnTheLocalSendTime(t *testing.T) {
	// The Redis clock is an hour off: the cache must not care.
	sent := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	denial := Result{Decisions: []Decision{{
		Limit: Limit{Name: "a", Count: 1, Window: time.Minute}, RetryAfter: 10 * time.Second, At: sent.Add(time.Hour),
	}}}
	cases := []struct {
		name    string
		at      time.Duration
		cached  bool
		waitFor time.Duration
	}{
		{"right after", 0, true, 10 * time.Second},
		{"half way", 5 * time.Second, true, 5 * time.Second},
		{"last microsecond", 10*time.Second - time.Microsecond, true, time.Microsecond},
		{"at T", 10 * time.Second, false, 0},
		{"after T", time.Hour, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newDenyCache(10, 0)
			k := newDenyKey(1, []Check{{Identity: "x", Limit: denial.Decisions[0].Limit}})
			c.remember(k, sent, denial)
			res, ok := c.lookup(k, sent.Add(tc.at))
			if ok != tc.cached {
				t.Fatalf("cached = %v, want %v", ok, tc.cached)
			}
			if ok && res.RetryAfter() != tc.waitFor {
				t.Fatalf("RetryAfter = %v, want %v", res.RetryAfter(), tc.waitFor)
			}
		})
	}
}

func TestDenyCacheStaysBounded(t *testing.T) {
	c := newDenyCache(100, 0)
	now := time.Now()
	for i := range 10000 {
		k := newDenyKey(1, []Check{{Identity: string(rune(i)) + "x", Limit: Limit{Name: "a", Count: 1, Window: time.Hour}}})
		c.remember(k, now, Result{Decisions: []Decision{{RetryAfter: time.Hour}}})
	}
	if n := c.len(); n > 100 {
		t.Fatalf("deny cache holds %d entries, bound 100", n)
	}
}

func TestDenyCacheKeysDistinguishEveryField(t *testing.T) {
	base := Check{Identity: "a", Limit: Limit{Name: "n", Count: 5, Window: time.Minute}}
	variants := map[string]func(c *Check){
		"identity":  func(c *Check) { c.Identity = "b" },
		"name":      func(c *Check) { c.Limit.Name = "m" },
		"count":     func(c *Check) { c.Limit.Count = 6 },
		"window":    func(c *Check) { c.Limit.Window = time.Hour },
		"algorithm": func(c *Check) { c.Limit.Algorithm = TokenBucket },
		// Length-prefixed fields: moving bytes between fields is a
		// different key.
		"boundary": func(c *Check) { c.Identity, c.Limit.Name = "an", "" },
	}
	k := newDenyKey(1, []Check{base})
	if newDenyKey(2, []Check{base}) == k {
		t.Error("cost does not change the key")
	}
	if newDenyKey(1, []Check{{Identity: "a", Limit: Limit{Name: "n", Count: 5, Window: time.Minute, Algorithm: SlidingWindow}}}) != k {
		t.Error("the default algorithm spelled out changes the key")
	}
	for name, change := range variants {
		c := base
		change(&c)
		if newDenyKey(1, []Check{c}) == k {
			t.Errorf("changing the %s does not change the key", name)
		}
	}
}

func TestBreakerOpensOnOutageAndProbesBeforeClosing(t *testing.T) {
	server := redistest.StartServer(t)
	client, err := redisclient.New(redisclient.Config{URL: server.URL(), Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	l, err := NewLimiter(client, Options{KeyPrefix: "breaker"})
	if err != nil {
		t.Fatal(err)
	}
	// Decisions run one at a time here, so the callback needs no lock.
	var changes []string
	gate := NewGate(l, GateOptions{
		BreakerFailures:      3,
		BreakerCooldown:      300 * time.Millisecond,
		OnBreakerStateChange: func(from, to string) { changes = append(changes, from+"->"+to) },
	})
	check := Check{Identity: "198.51.100.1", Limit: Limit{Name: "a", Count: 100, Window: time.Minute}}
	ctx := context.Background()

	server.Stop()
	for range 10 {
		if _, err := gate.Decide(ctx, 1, FailOpen, check); err != nil {
			t.Fatal(err)
		}
	}
	s := gate.stats()
	if s.breakerState != "open" || s.redisCalls != 3 || s.breakerSkips != 7 {
		t.Fatalf("after 10 decisions with Redis down: %+v, want open after 3 Redis calls", s)
	}
	if _, err := gate.Decide(ctx, 1, FailClosed, check); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("fail-closed with the breaker open: err = %v, want ErrUnavailable", err)
	}

	server.Restart(t)
	time.Sleep(350 * time.Millisecond) // the cool-down
	res, err := gate.Decide(ctx, 1, FailOpen, check)
	if err != nil || res.Degraded {
		t.Fatalf("probe after the cool-down: degraded=%v err=%v", res.Degraded, err)
	}
	if s := gate.stats(); s.breakerState != "closed" {
		t.Fatalf("breaker is %s after a successful probe, want closed", s.breakerState)
	}
	// Every change was reported, once, in order.
	if want := []string{"closed->open", "open->half-open", "half-open->closed"}; !slices.Equal(changes, want) {
		t.Fatalf("OnBreakerStateChange saw %v, want %v", changes, want)
	}
}

func TestBreakerIgnoresOneDeadShardAmongHealthyOnes(t *testing.T) {
	// A warm instance on a cluster with one master of three down: a third
	// of the decisions fail, often several in a row. (A cold instance whose
	// first five decisions all fail does open, for one cool-down.)
	b := newRedisBreaker(breakerOptions{failures: 5, cooldown: time.Minute}, nil)
	ctx := context.Background()
	failure := fmt.Errorf("%w: connection refused", ErrUnavailable)
	for range 10 { // a warm instance
		done, _ := b.allow()
		done(nil, ctx)
	}
	for range 20 {
		for _, err := range []error{failure, failure, failure, failure, failure, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil} {
			done, ok := b.allow()
			if !ok {
				t.Fatal("breaker opened while two thirds of decisions succeed")
			}
			done(err, ctx)
		}
	}
	// A caller giving up is not Redis's fault.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	for range 10 {
		done, _ := b.allow()
		done(context.Canceled, gone)
	}
	if b.state() != "closed" {
		t.Fatalf("breaker %s after callers cancelled, want closed", b.state())
	}
}

// TestGateFailuresCarryRedisTimeAndCause: a Redis call that fails is Redis
// time too. Whether Redis is gone, hangs past the timeout or refuses the
// password, a fail-open request's degraded result, a peek's, and the
// result of a fail-closed request all carry the time the attempt took; the
// degraded ones say why Redis failed, in words that never quote the
// password.
func TestGateFailuresCarryRedisTimeAndCause(t *testing.T) {
	const password = "planted-redis-password-Qx7"
	server := redistest.StartServerWith(t, redistest.Options{Admin: true, Args: []string{"--requirepass", password}})
	throughProxy := func(mode faultproxy.Mode) func(t *testing.T) (string, string) {
		return func(t *testing.T) (string, string) {
			proxy, err := faultproxy.Start(server.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { proxy.Close() })
			if err := proxy.SetMode(mode); err != nil {
				t.Fatal(err)
			}
			return proxy.URL(), password
		}
	}
	direct := func(pass string) func(t *testing.T) (string, string) {
		return func(*testing.T) (string, string) { return server.URL(), pass }
	}
	cases := []struct {
		name      string
		redis     func(t *testing.T) (url, password string)
		wantCause string // in the degraded result's Cause
	}{
		{"Redis control: answers", direct(password), ""},
		{"connection refused", throughProxy(faultproxy.Refuse), "refused"},
		{"Redis hangs past the timeout", throughProxy(faultproxy.BlackHole), "timeout"},
		{"wrong password", direct("wrong-" + password), "WRONGPASS"},
		{"no password", direct(""), "NOAUTH"},
	}
	check := Check{Identity: "198.51.100.7", Limit: Limit{Name: "a", Count: 100, Window: time.Minute}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, pass := tc.redis(t)
			client, err := redisclient.New(redisclient.Config{URL: url, Password: pass, Timeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { client.Close() })
			l, err := NewLimiter(client, Options{KeyPrefix: "failtime"})
			if err != nil {
				t.Fatal(err)
			}
			gate := NewGate(l, GateOptions{BreakerDisabled: true})
			ctx := context.Background()

			decided, err := gate.Decide(ctx, 1, FailOpen, check)
			if err != nil {
				t.Fatalf("fail-open: %v", err)
			}
			peeked, err := gate.Peek(ctx, 1, check)
			if err != nil {
				t.Fatalf("peek: %v", err)
			}
			for name, res := range map[string]Result{"fail-open decision": decided, "peek": peeked} {
				if res.RedisLatency <= 0 {
					t.Errorf("%s: RedisLatency %v, want the time Redis was asked", name, res.RedisLatency)
				}
				if tc.wantCause == "" {
					if res.Degraded || res.Cause != nil {
						t.Errorf("%s: degraded %v, cause %v; want Redis's answer", name, res.Degraded, res.Cause)
					}
					continue
				}
				if !res.Degraded || !errors.Is(res.Cause, ErrUnavailable) || !strings.Contains(res.Cause.Error(), tc.wantCause) {
					t.Errorf("%s: degraded %v, cause %v; want degraded, ErrUnavailable saying %q", name, res.Degraded, res.Cause, tc.wantCause)
				}
				if res.Cause != nil && strings.Contains(res.Cause.Error(), password) {
					t.Errorf("%s: the cause quotes the password: %v", name, res.Cause)
				}
			}

			closed, err := gate.Decide(ctx, 1, FailClosed, check)
			if (err != nil) != (tc.wantCause != "") || (err != nil && !errors.Is(err, ErrUnavailable)) {
				t.Fatalf("fail-closed: err = %v, want ErrUnavailable exactly when Redis fails", err)
			}
			if closed.RedisLatency <= 0 {
				t.Errorf("fail-closed: RedisLatency %v, want the time Redis was asked", closed.RedisLatency)
			}
			if closed.Cause != nil {
				t.Errorf("fail-closed: Cause %v, want nil (the error says why)", closed.Cause)
			}
		})
	}
}

// TestGateReportsNoRedisTimeWhenRedisWasNotAsked: with the circuit breaker
// open no decision asks Redis, so none reports Redis time; the degraded
// one still says why Redis did not decide.
func TestGateReportsNoRedisTimeWhenRedisWasNotAsked(t *testing.T) {
	cases := []struct {
		name   string
		policy FailurePolicy
	}{
		{"fail-open, degraded", FailOpen},
		{"fail-closed, rejected", FailClosed},
	}
	check := Check{Identity: "198.51.100.8", Limit: Limit{Name: "a", Count: 100, Window: time.Minute}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gate := NewGate(refusedLimiter(t), GateOptions{BreakerFailures: 1, BreakerCooldown: time.Hour})
			ctx := context.Background()
			if res, _ := gate.Decide(ctx, 1, FailOpen, check); res.RedisLatency <= 0 {
				t.Fatalf("the failure that opens the breaker: RedisLatency %v, want its time", res.RedisLatency)
			}
			if s := gate.stats(); s.breakerState != "open" {
				t.Fatalf("breaker %s after a failure, want open", s.breakerState)
			}
			res, err := gate.Decide(ctx, 1, tc.policy, check)
			if got := gate.stats().redisCalls; got != 1 {
				t.Fatalf("%d Redis calls, want 1: the breaker is open", got)
			}
			if res.RedisLatency != 0 {
				t.Errorf("RedisLatency %v with the breaker open, want 0", res.RedisLatency)
			}
			if tc.policy == FailClosed {
				if !errors.Is(err, ErrUnavailable) || res.Cause != nil {
					t.Errorf("err %v, cause %v; want ErrUnavailable and no Cause", err, res.Cause)
				}
				return
			}
			if err != nil || !res.Degraded || !errors.Is(res.Cause, ErrUnavailable) || !strings.Contains(res.Cause.Error(), "circuit breaker open") {
				t.Errorf("err %v, degraded %v, cause %v; want degraded because the breaker is open", err, res.Degraded, res.Cause)
			}
		})
	}
}
