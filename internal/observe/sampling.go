// Package observe is what slidegate tells its operator: one JSON log line
// and one CloudWatch Embedded Metric Format record per decision, both
// derived from the decision's apigw.Outcome (its Kind names the outcome,
// the reason and the log level), log lines sampled per kind so that a
// flood cannot flood the log, and go-redis's own messages in the same log.
// Metrics are never sampled.
package observe

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Log sampling defaults: a flood of requests gives each kind of log line
// at most a burst of 50 lines, then 20 a second.
const (
	DefaultLogLinesPerSecond = 20
	DefaultLogBurst          = 50
)

// LogSampling is a per-process budget of log lines: one token bucket per
// kind of line (for decision lines, the outcome and its reason: a
// rejected unauthorized credential apart from a rejected fail-closed
// route, so that lines any caller can cause never use up the budget of
// lines an operator must see; for SampledHandler, the message), holding
// Burst
// lines and refilled at PerSecond. A line that finds its bucket empty is
// dropped and counted; the next line of that kind that is written carries
// the count as "suppressed". Lambda freezes an instance between
// invocations, so there is no periodic summary: a count waits for the next
// line of its kind. Metrics are never sampled: CloudWatch's Decisions
// metric counts every decision, logged or not.
//
// The zero value is the default budget.
type LogSampling struct {
	// PerSecond is the sustained rate of each kind of line;
	// DefaultLogLinesPerSecond when zero. Negative turns sampling off:
	// every line is written.
	PerSecond float64
	// Burst is how many lines of one kind may be written at once after a
	// quiet spell; DefaultLogBurst when zero or negative.
	Burst int
	// Now is the budget's clock; time.Now when nil.
	Now func() time.Time
}

// maxLogKinds bounds a budget's buckets; kinds beyond it share one.
const maxLogKinds = 64

// logBudget is the token buckets of a LogSampling. It is safe for
// concurrent use; a nil budget admits every line.
type logBudget struct {
	perSecond, burst float64
	now              func() time.Time

	mu      sync.Mutex
	buckets map[string]*lineBucket
}

// lineBucket is the budget of one kind of line.
type lineBucket struct {
	tokens     float64
	last       time.Time
	suppressed int64
}

// newLogBudget returns the budget s describes, or nil when sampling is
// off.
func newLogBudget(s LogSampling) *logBudget {
	if s.PerSecond < 0 {
		return nil
	}
	b := &logBudget{perSecond: s.PerSecond, burst: float64(s.Burst), now: s.Now, buckets: make(map[string]*lineBucket, 4)}
	if b.perSecond == 0 {
		b.perSecond = DefaultLogLinesPerSecond
	}
	if s.Burst <= 0 {
		b.burst = DefaultLogBurst
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

// admit reports whether a line of kind may be written now and, when it
// may, how many lines of that kind were dropped since the last one
// written (the count is then reset). A clock that steps back refills
// nothing until it passes the last step forward again.
func (b *logBudget) admit(kind string) (ok bool, suppressed int64) {
	if b == nil {
		return true, 0
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	bucket := b.buckets[kind]
	if bucket == nil {
		if len(b.buckets) >= maxLogKinds {
			kind = ""
			bucket = b.buckets[kind]
		}
		if bucket == nil {
			bucket = &lineBucket{tokens: b.burst, last: now}
			b.buckets[kind] = bucket
		}
	}
	if elapsed := now.Sub(bucket.last); elapsed > 0 {
		bucket.tokens = min(b.burst, bucket.tokens+elapsed.Seconds()*b.perSecond)
		bucket.last = now
	}
	if bucket.tokens < 1 {
		bucket.suppressed++
		return false, 0
	}
	bucket.tokens--
	suppressed, bucket.suppressed = bucket.suppressed, 0
	return true, suppressed
}

// SampledHandler returns a handler that passes records to next within the
// budget s, one bucket per message: a record over its message's budget is
// dropped, and the next record of that message that passes carries
// "suppressed" (how many were dropped). It is for lines a caller can
// cause in a flood (malformed events, undecided requests); handlers made
// from it by WithAttrs and WithGroup share its budget.
func SampledHandler(next slog.Handler, s LogSampling) slog.Handler {
	return &sampledHandler{next: next, budget: newLogBudget(s)}
}

type sampledHandler struct {
	next   slog.Handler
	budget *logBudget
}

// Enabled implements slog.Handler.
func (h *sampledHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (h *sampledHandler) Handle(ctx context.Context, r slog.Record) error {
	ok, suppressed := h.budget.admit(r.Message)
	if !ok {
		return nil
	}
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64(attrSuppressed, suppressed))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *sampledHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &sampledHandler{next: h.next.WithAttrs(attrs), budget: h.budget}
}

// WithGroup implements slog.Handler.
func (h *sampledHandler) WithGroup(name string) slog.Handler {
	return &sampledHandler{next: h.next.WithGroup(name), budget: h.budget}
}

// attrSuppressed is the attribute counting the lines dropped before this
// one.
const attrSuppressed = "suppressed"
