package edge

import (
	"context"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Admission is the answer of the API function's in-flight limits
// (RATE_LIMIT_CONCURRENCY) for one request, taken before its handler runs:
// the slots it holds while it runs, or the limit that is full.
type Admission struct {
	// Denied is true when one of the request's in-flight limits is full:
	// 429 with Retry-After, and the handler is not called. Nothing is held
	// then.
	Denied bool
	// Slot is the denying limit's answer when Denied (Slot.RetryAfter is
	// the wait to suggest); the zero Slot otherwise.
	Slot ratelimit.Slot
	// Release gives back every slot the request holds; nil when it holds
	// none. It is called once, when the handler returns, with a context
	// that outlives the request's.
	Release func(ctx context.Context)
}
