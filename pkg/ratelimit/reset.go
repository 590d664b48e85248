package ratelimit

import (
	"context"
	"fmt"
)

// Reset deletes what Redis holds for each check's limit and identity, so
// that the identity starts those limits afresh, as if it had never been
// seen: the next request is decided against the whole budget. It returns
// how many of the limits had state (a limit never used, or whose state had
// expired, has none); a limit given twice counts once.
//
// Only the given limits are reset, under the Limiter's key prefix and
// identity hash key: a Limiter with another hash key resets nothing of the
// identity's. The keys of one identity share its hash tag, so they are
// deleted together, in one command per identity, on a single server as in
// a cluster. A Gate's deny cache is not Redis: a process that denied the
// identity keeps denying it from memory until the RetryAfter it reported.
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
	// One DEL per identity, keys deduplicated (DEL counts a key given twice
	// once anyway, but the reply would not say which).
	var order []string
	keysByTag := make(map[string][]string)
	seen := make(map[string]bool)
	for _, c := range checks {
		tag := l.keys.identityTag(c.Identity)
		key := l.keys.key(tag, c.Limit)
		if seen[key] {
			continue
		}
		seen[key] = true
		if _, ok := keysByTag[tag]; !ok {
			order = append(order, tag)
		}
		keysByTag[tag] = append(keysByTag[tag], key)
	}
	deleted := 0
	for _, tag := range order {
		n, err := l.client.Del(ctx, keysByTag[tag]...).Result()
		if err != nil {
			return deleted, fmt.Errorf("reset: %w: %w", ErrUnavailable, err)
		}
		deleted += int(n)
	}
	return deleted, nil
}
