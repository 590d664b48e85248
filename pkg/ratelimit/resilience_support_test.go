package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// decisionBudget is the budget of a decision in the resilience tests: the
// functions' default (REDIS_TIMEOUT, 100 ms).
const decisionBudget = 100 * time.Millisecond

// productionClient builds the client the functions build (NewClient with
// the given budget) for url, closed when t ends.
func productionClient(t testing.TB, url string, cluster bool) redis.UniversalClient {
	t.Helper()
	return clientWithBudget(t, url, cluster, decisionBudget)
}

// clientWithBudget is productionClient with another budget, for tests whose
// subject is not time and that must not fail because a loaded machine
// stalled a decision past 100 ms.
func clientWithBudget(t testing.TB, url string, cluster bool, budget time.Duration) redis.UniversalClient {
	t.Helper()
	c, err := redisclient.New(redisclient.Config{URL: url, Cluster: cluster, Timeout: budget})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// productionGate builds a limiter (scripts not preloaded: a cold start) and
// a Gate on client. The budget is opts.Timeout, DefaultTimeout when zero.
func productionGate(t testing.TB, client redis.UniversalClient, prefix string, opts ratelimit.GateOptions) *ratelimit.Gate {
	t.Helper()
	return productionGateWithin(t, client, prefix, 0, opts)
}

// productionGateWithin is productionGate with a decision budget of timeout
// (the Limiter's Options.Timeout; DefaultTimeout when zero).
func productionGateWithin(t testing.TB, client redis.UniversalClient, prefix string, timeout time.Duration, opts ratelimit.GateOptions) *ratelimit.Gate {
	t.Helper()
	return ratelimit.NewGate(productionLimiter(t, client, prefix, timeout), opts)
}

// productionLimiter is the Limiter of productionGateWithin.
func productionLimiter(t testing.TB, client redis.UniversalClient, prefix string, timeout time.Duration) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: prefix, Timeout: timeout})
	if err != nil {
		t.Fatalf("new limiter: %v", err)
	}
	return l
}

// breakerWatch follows a Gate's circuit breaker through
// GateOptions.OnBreakerStateChange.
type breakerWatch struct {
	mu      sync.Mutex
	current string // "" until the first change: closed
}

// record is the OnBreakerStateChange callback.
func (w *breakerWatch) record(_, to string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.current = to
}

// state is the breaker's state after the last change it reported.
func (w *breakerWatch) state() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current == "" {
		return "closed"
	}
	return w.current
}

// decisionLog records what callers saw during a run of decisions.
type decisionLog struct {
	mu       sync.Mutex
	count    int
	allowed  int
	degraded int
	errs     []error
	slowest  time.Duration
	firstDeg time.Time
	lastDeg  time.Time
	// onRedis is how many decisions in a row, up to the last, were made
	// on Redis: neither failed nor degraded.
	onRedis int
}

// decide runs one decision through gate, timing it, and records the answer.
func (l *decisionLog) decide(gate *ratelimit.Gate, policy ratelimit.FailurePolicy, checks ...ratelimit.Check) (ratelimit.Result, error) {
	start := time.Now()
	res, err := gate.Decide(context.Background(), 1, policy, checks...)
	took := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	l.slowest = max(l.slowest, took)
	l.onRedis++
	switch {
	case err != nil:
		l.errs = append(l.errs, err)
		l.onRedis = 0
	case res.Degraded:
		l.degraded++
		if l.firstDeg.IsZero() {
			l.firstDeg = start
		}
		l.lastDeg = start.Add(took)
		l.onRedis = 0
	}
	if err == nil && res.Allowed {
		l.allowed++
	}
	return res, err
}

// counted returns how many decisions l has recorded, a mark for settle.
func (l *decisionLog) counted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// settle waits, for at most limit, until l has recorded n decisions since
// it had counted from and its last n were all made on Redis: the load has
// met whatever changed at from, and is past it. It reports whether that
// happened in time; if not, the caller's checks of the log judge why.
func (l *decisionLog) settle(from, n int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		l.mu.Lock()
		done := l.count-from >= n && l.onRedis >= n
		l.mu.Unlock()
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// degradedFor is how long decisions were degraded, first to last.
func (l *decisionLog) degradedFor() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstDeg.IsZero() {
		return 0
	}
	return l.lastDeg.Sub(l.firstDeg)
}

// checkWithinBudget fails t if a decision ran well past the budget.
func (l *decisionLog) checkWithinBudget(t testing.TB, what string) {
	t.Helper()
	t.Logf("%s: %d decisions, slowest %v (budget %v)", what, l.count, l.slowest.Round(time.Microsecond), decisionBudget)
	if l.slowest > decisionBudget+testkit.BudgetSlack {
		t.Errorf("%s: slowest decision took %v, budget is %v", what, l.slowest, decisionBudget)
	}
}

// waitShared decides on gate until a decision is made on Redis again (not
// degraded), for at most limit, and returns how long that took.
func waitShared(t testing.TB, gate *ratelimit.Gate, check ratelimit.Check, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		res, err := gate.Decide(context.Background(), 1, ratelimit.FailOpen, check)
		if err != nil {
			t.Fatalf("fail-open decision returned an error while recovering: %v", err)
		}
		if !res.Degraded {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("decisions still degraded %v after Redis returned (last cause: %v)", limit, res.Cause)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isUnavailable reports whether err is the fail-closed answer.
func isUnavailable(err error) bool { return errors.Is(err, ratelimit.ErrUnavailable) }
