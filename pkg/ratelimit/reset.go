package ratelimit

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Reset deletes what Redis holds for each check's limit and identity, so
// that the identity starts those limits afresh, as if it had never been
// seen: the next request is decided against the whole budget. It returns
// how many of the limits had state (a limit never used, or whose state had
// expired, has none); a limit given twice counts once.
//
// Only the given limits are reset, under the Limiter's key prefix and
// identity hash key: a Limiter with another hash key resets nothing of the
// identity's. A limit's key does not name its count, so resetting a limit
// resets it whatever count it was spent under; one DEL per limit removes
// it on a single server as in a cluster. A Gate's
// deny cache is not Redis: a process that denied the identity keeps denying
// it from memory until the RetryAfter it reported.
//
// Reset writes to Redis (it is no dry run): it is for operators, not for
// the decision path.
func (l *Limiter) Reset(ctx context.Context, checks ...Check) (int, error) {
	if len(checks) == 0 {
		return 0, fmt.Errorf("reset: %w: no limits to reset", ErrInvalid)
	}
	for _, c := range checks {
		if err := c.Limit.Validate(); err != nil {
			return 0, fmt.Errorf("reset: %w: %w", ErrInvalid, err)
		}
	}
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	// One DEL per limit, sent in one pipeline. Keys given twice are
	// deleted once.
	var keys []string
	seen := make(map[string]bool)
	for _, c := range checks {
		key := l.keys.key(l.keys.identityTag(c.Identity), c.Limit)
		if seen[key] {
			continue
		}
		seen[key] = true
		keys = append(keys, key)
	}
	cmds := make([]*redis.IntCmd, len(keys))
	_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			cmds[i] = p.Del(ctx, key)
		}
		return nil
	})
	deleted := 0
	for _, cmd := range cmds {
		if n, cerr := cmd.Result(); cerr == nil && n > 0 {
			deleted++
		}
	}
	if err != nil {
		return deleted, fmt.Errorf("reset: %w: %w", ErrUnavailable, err)
	}
	return deleted, nil
}
