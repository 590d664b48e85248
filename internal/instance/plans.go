package instance

import (
	"context"
	"log/slog"
	"sync"
)

// maxUnknownPlans bounds the unconfigured plan names an instance
// remembers having logged: plans come from signed tokens and the
// operator's own key lists, so a handful at most; beyond the bound, no
// more are logged.
const maxUnknownPlans = 256

// unknownPlans logs each plan a caller carries but no configuration
// names, once per instance: such a caller gets its tier's limits, never a
// fresh limit of its own. It is safe for concurrent use.
type unknownPlans struct {
	mu     sync.Mutex
	logged map[string]struct{}
}

// note logs plan the first time it is seen.
func (u *unknownPlans) note(ctx context.Context, logger *slog.Logger, plan, tier string) {
	u.mu.Lock()
	_, seen := u.logged[plan]
	full := len(u.logged) >= maxUnknownPlans
	if !seen && !full {
		if u.logged == nil {
			u.logged = make(map[string]struct{})
		}
		u.logged[plan] = struct{}{}
	}
	u.mu.Unlock()
	if seen || full {
		return
	}
	logger.LogAttrs(ctx, slog.LevelWarn, "caller's plan is not configured: its tier's limits apply (RATE_LIMIT_PLANS, rateLimitPlan<Plan>)",
		slog.String("unknownPlan", plan), slog.String("tier", tier))
}
