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
// identity's. Each limit's keys (today's and an older layout's, which an
// older release may have left) share the identity's hash tag, so one
// DEL per limit removes them on a single server as in a cluster. A Gate's
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
	// One DEL per limit, each with the key of the layout before the
	// integer counters too (a new instance imports that key's count when
	// it creates its own, so it must go as well), sent in one pipeline.
	// Keys given twice are deleted once.
	type limitKeys struct{ keys []string }
	var limits []limitKeys
	seen := make(map[string]bool)
	for _, c := range checks {
		tag := l.keys.identityTag(c.Identity)
		key := l.keys.key(tag, c.Limit)
		if seen[key] {
			continue
		}
		seen[key] = true
		lk := limitKeys{keys: []string{key}}
		if legacy := l.keys.legacyKey(tag, c.Limit); legacy != key {
			lk.keys = append(lk.keys, legacy)
		}
		limits = append(limits, lk)
	}
	cmds := make([]*redis.IntCmd, len(limits))
	_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, lk := range limits {
			cmds[i] = p.Del(ctx, lk.keys...)
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
