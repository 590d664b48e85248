package ratelimit_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// commandCounter is a go-redis hook that counts the commands a client
// sends: the Redis calls a workload costs.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// hotAttack is one identity knocking at 100 times its limit: 10 per second
// allowed, one request every millisecond, on a clock stepped by hand (the
// scripts' clock and the gate's) so that an attack of any length runs as
// fast as Redis answers.
type hotAttack struct {
	gate     *ratelimit.Gate
	counter  *commandCounter
	now      atomic.Int64 // Unix microseconds
	check    ratelimit.Check
	denied   int64
	admitted int64
}

func newHotAttack(tb testing.TB, server *redistest.Server, prefix string, denyCache bool) *hotAttack {
	tb.Helper()
	a := &hotAttack{counter: &commandCounter{}}
	a.now.Store(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMicro())
	clock := func() time.Time { return time.UnixMicro(a.now.Load()) }
	client := productionClient(tb, server.URL(), false)
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: prefix, Timeout: time.Second, Now: clock})
	if err != nil {
		tb.Fatalf("new limiter: %v", err)
	}
	if err := limiter.LoadScripts(context.Background()); err != nil {
		tb.Fatalf("load scripts: %v", err)
	}
	client.AddHook(a.counter)
	a.gate = ratelimit.NewGate(limiter, ratelimit.GateOptions{DenyCacheDisabled: !denyCache})
	a.check = ratelimit.Check{Identity: "203.0.113.66", Limit: ratelimit.Limit{Name: "anonymous", Count: 10, Window: time.Second}}
	return a
}

// request sends one attack request and moves the clock on by 1 ms.
func (a *hotAttack) request(tb testing.TB) {
	res, err := a.gate.Decide(context.Background(), 1, ratelimit.FailOpen, a.check)
	if err != nil || res.Degraded {
		tb.Fatalf("attack request: degraded=%v err=%v", res.Degraded, err)
	}
	if res.Allowed {
		a.admitted++
	} else {
		a.denied++
	}
	a.now.Add(int64(time.Millisecond / time.Microsecond))
}

func (a *hotAttack) callsPerDenied() float64 {
	return float64(a.counter.n.Load()) / float64(max(a.denied, 1))
}

// BenchmarkHotAttacker measures what a hot attacker costs Redis with the
// deny cache on and off. Each iteration is one request; with
// -benchtime=10000x it is exactly the scenario, 10 s at 100x the
// limit:
//
//	go test ./tests/ -run '^$' -bench HotAttacker -benchtime=10000x
func BenchmarkHotAttacker(b *testing.B) {
	server := redistest.StartServer(b)
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("denycache=%v", on), func(b *testing.B) {
			a := newHotAttack(b, server, fmt.Sprintf("hot-%v-%d", on, b.N), on)
			for b.Loop() {
				a.request(b)
			}
			b.ReportMetric(a.callsPerDenied(), "redis-calls/denied")
			b.ReportMetric(float64(a.admitted), "admitted")
			b.ReportMetric(float64(a.denied), "denied")
		})
	}
}

// TestHotAttackerCostsRedisLittleWithTheDenyCache runs two seconds of the
// hot attack: with the deny cache, denied requests cost Redis at most one
// call in ten, without it one each; the same requests are admitted either
// way (the cache never denies what Redis would admit).
func TestHotAttackerCostsRedisLittleWithTheDenyCache(t *testing.T) {
	server := redistest.StartServer(t)
	const requests = 2000
	results := map[bool]*hotAttack{}
	for _, on := range []bool{true, false} {
		a := newHotAttack(t, server, fmt.Sprintf("hot-test-%v", on), on)
		for range requests {
			a.request(t)
		}
		t.Logf("deny cache %v: %d admitted, %d denied, %.4f Redis calls per denied request",
			on, a.admitted, a.denied, a.callsPerDenied())
		results[on] = a
	}
	if on, off := results[true], results[false]; on.admitted != off.admitted {
		t.Errorf("admitted %d with the deny cache, %d without: the cache changed decisions", on.admitted, off.admitted)
	}
	if got := results[true].callsPerDenied(); got > 0.1 {
		t.Errorf("with the deny cache: %.3f Redis calls per denied request, want at most 0.1", got)
	}
	if got := results[false].callsPerDenied(); got < 1 {
		t.Errorf("without the deny cache: %.3f Redis calls per denied request, want at least 1", got)
	}
}
