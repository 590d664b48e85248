package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Log level configuration.
const (
	// LogLevelVariable is the environment variable of a function's log
	// level: debug, info, warn or error.
	LogLevelVariable = "LOG_LEVEL"
	// LambdaLogLevelVariable is set by Lambda's advanced logging controls
	// (the function's LoggingConfig.ApplicationLogLevel: TRACE, DEBUG, INFO,
	// WARN, ERROR or FATAL). It is read when LOG_LEVEL is unset.
	LambdaLogLevelVariable = "AWS_LAMBDA_LOG_LEVEL"
	// DefaultLogLevel is the level when neither variable is set, or when
	// the one that is set does not parse: allowed decisions (Debug) are
	// not logged, everything else is.
	DefaultLogLevel = slog.LevelInfo
)

// LogLevel reads a function's log level from LOG_LEVEL, or when that is
// unset from AWS_LAMBDA_LOG_LEVEL: "debug", "info", "warn" (or "warning")
// and "error", in any case, plus Lambda's "trace" (as debug) and "fatal"
// (as error). With neither set it is DefaultLogLevel. A value that does not
// parse gives DefaultLogLevel and an error that names the variable, the
// value and the level used; bad configuration never silences the log.
func LogLevel(getenv func(string) string) (slog.Level, error) {
	name := LogLevelVariable
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		name = LambdaLogLevelVariable
		v = strings.TrimSpace(getenv(name))
	}
	if v == "" {
		return DefaultLogLevel, nil
	}
	switch strings.ToLower(v) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "fatal":
		return slog.LevelError, nil
	}
	return DefaultLogLevel, fmt.Errorf("%s=%q: want debug, info, warn or error; using %s",
		name, clip(v, 32), strings.ToLower(DefaultLogLevel.String()))
}

// NewLogger returns a function's logger: JSON lines on w, at the level
// LogLevel reads from getenv (os.Getenv in main). A level that does not
// parse is logged on the new logger as a configuration error, like every
// other bad configuration value, and the default level is used.
func NewLogger(ctx context.Context, w io.Writer, getenv func(string) string) *slog.Logger {
	level, err := LogLevel(getenv)
	logger := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	logConfigErrors(ctx, logger, err)
	return logger
}

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

// clip bounds text a caller can choose, or that is long by accident, in a
// log line or a metric property.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
