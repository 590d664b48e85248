package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// New returns a Gate deciding on client (any go-redis v9 client, of which
// it uses the commands NewLimiter lists) with every default: keys under
// "rl:", a 100 ms budget per decision, and when Redis cannot decide (down,
// too slow, or the circuit breaker open) each decision of Allow falls back
// to a local limit of a tenth of the limit per process (GateOptions'
// defaults), its Result marked Degraded. It does not contact Redis.
//
// go-redis reports some failures (a refused dial, say) by printing through
// its own process-wide logger, to stderr by default; New replaces that
// logger, once per process, with one that prints nothing, so that a Redis
// outage costs no log line per decision. The Gate's answers say everything
// those lines would: Result.Degraded, or the error. A program that wants
// go-redis's lines calls redis.SetLogger after New.
//
// For more (several limits per request, costs, fail-closed routes, live
// controls) build the Limiter and the Gate yourself: NewLimiter, NewGate.
func New(client rediser) (*Gate, error) {
	l, err := NewLimiter(client, Options{})
	if err != nil {
		return nil, err
	}
	silenceRedisLogger.Do(func() { redis.SetLogger(discardRedisLog{}) })
	return NewGate(l, GateOptions{}), nil
}

// PerSecond is a limit of n requests per second (a sliding window).
func PerSecond(n int64) Limit { return perWindow(n, time.Second, "s") }

// PerMinute is a limit of n requests per minute (a sliding window).
func PerMinute(n int64) Limit { return perWindow(n, time.Minute, "m") }

// PerHour is a limit of n requests per hour (a sliding window).
func PerHour(n int64) Limit { return perWindow(n, time.Hour, "h") }

// perWindow names a limit by its rate ("100-per-m"): a key's count belongs
// to its limit's name, so limits that differ get counts of their own.
func perWindow(n int64, window time.Duration, unit string) Limit {
	return Limit{Name: strconv.FormatInt(n, 10) + "-per-" + unit, Count: n, Window: window}
}

// Allow spends one request of limit for key (an IP address, a user id, an
// API key: any bytes, hashed before they reach Redis) and answers whether
// it is admitted. It fails open: when Redis cannot decide, the local
// fallback does, and the Result says Degraded, so an error means a request
// that can never be decided (ErrInvalid: a limit with no name, a count or
// window out of range), not an outage. Result.RetryAfter is the wait a
// denied caller should be told; httplimit.SetHeaders writes the rate-limit headers.
func (g *Gate) Allow(ctx context.Context, key string, limit Limit) (Result, error) {
	res, err := g.Decide(ctx, 1, FailOpen, Check{Identity: key, Limit: limit})
	if err != nil {
		return Result{}, fmt.Errorf("allow %s: %w", limit, err)
	}
	return res, nil
}

// silenceRedisLogger installs discardRedisLog once per process.
var silenceRedisLogger sync.Once

// discardRedisLog is a go-redis logger that prints nothing.
type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}
