// Package scriptclock lets this module's tests and benchmarks run
// pkg/ratelimit on a clock they step, in place of Redis's.
//
// A Limiter's scripts read the time from Redis (TIME), so that instances
// whose clocks are skewed still agree; a library user has no way to change
// that. A test that must step time precisely (an exact Retry-After, a
// window's edge) wraps its Redis client with Wrap and gives the wrapper to
// ratelimit.NewLimiter: the Limiter then decides on the unwrapped client
// and passes the clock's time to its scripts, and a Gate around it keeps
// its fallback and deny cache on the same clock.
package scriptclock

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is a Redis client together with the clock a Limiter built on it
// decides with. Only ratelimit.NewLimiter looks inside it; used as a client
// by anything else, it is its UniversalClient.
type Client struct {
	redis.UniversalClient
	// Now replaces Redis's TIME as the scripts' time.
	Now func() time.Time
}

// Wrap returns client with now as the clock for a Limiter built on it.
func Wrap(client redis.UniversalClient, now func() time.Time) *Client {
	return &Client{UniversalClient: client, Now: now}
}

// Unwrap returns the client under c and its clock: for a *Client its
// UniversalClient and Now, for any other client c itself and nil (Redis's
// clock).
func Unwrap(c redis.UniversalClient) (redis.UniversalClient, func() time.Time) {
	if w, ok := c.(*Client); ok {
		return w.UniversalClient, w.Now
	}
	return c, nil
}
