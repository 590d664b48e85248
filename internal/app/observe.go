package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/wire"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Bounds of caller-chosen text in a log line or a metric property.
const (
	maxMethodLen    = 16
	maxPathLen      = 256
	maxRequestIDLen = 128
	maxReasonLen    = 200
	maxErrorLen     = 512
	// maxRedisErrorLen bounds why Redis failed on a degraded line: enough
	// for a dial or AUTH error, not for a flood of text.
	maxRedisErrorLen = 200
)

// DecisionMessage is the message of every decision's log line.
const DecisionMessage = "rate limit decision"

// Reasons of the decision log line: why the outcome is what it is.
const (
	ReasonWithinLimit  = "within limit"
	ReasonOverLimit    = "over limit"
	ReasonFallback     = "redis unavailable: the local fallback limit decided"
	ReasonUnauthorized = "unauthorized credential"
	ReasonUnavailable  = "redis unavailable on a fail-closed route"
	ReasonUndecidable  = "limits cannot be decided"
)

// decisionRecord is what is observed of one decision.
type decisionRecord struct {
	req Request
	out Outcome
	// credential is the identity resolver's note on a presented
	// credential that earned nothing ("unknown api key", "bearer token:
	// ..."); empty otherwise.
	credential string
	err        error
	latency    time.Duration
}

// decisionObserver publishes decisions: one EMF record each on the
// metrics writer, never sampled, and one log line each within the log
// level and the log budget. It is safe for concurrent use.
type decisionObserver struct {
	logger  *slog.Logger
	budget  *logBudget     // nil: every line within the level is written
	metrics *metricsWriter // nil: no metrics
	breaker *breakerWatch
}

// newDecisionObserver returns an observer logging on logger within
// sampling and writing metrics on w (nothing when w is io.Discard).
func newDecisionObserver(logger *slog.Logger, w io.Writer, sampling LogSampling) *decisionObserver {
	return &decisionObserver{
		logger:  logger,
		budget:  newLogBudget(sampling),
		metrics: newMetricsWriter(w),
		breaker: newBreakerWatch(),
	}
}

// observe publishes one decision: metrics first, whatever the log does.
func (o *decisionObserver) observe(ctx context.Context, rec decisionRecord) {
	outcome := OutcomeName(rec.out, rec.err)
	changes, state := o.breaker.take()
	if changes > 0 {
		level := slog.LevelWarn
		if state == breakerClosed {
			level = slog.LevelInfo
		}
		o.logger.LogAttrs(ctx, level, "redis circuit breaker changed state",
			slog.String("breakerState", state), slog.Int64("breakerStateChanges", changes))
	}
	var err error
	if o.metrics != nil {
		err = o.metrics.write(metricsRecord{
			tier:            rec.out.Caller.Tier,
			outcome:         outcome,
			decisionLatency: rec.latency,
			redisLatency:    rec.out.Result.RedisLatency,
			requestID:       clip(rec.req.RequestID, maxRequestIDLen),
			lambdaRequestID: clip(rec.req.LambdaRequestID, maxRequestIDLen),
			breakerState:    state,
			breakerChanges:  changes,
			timestampMillis: time.Now().UnixMilli(),
		})
	}
	if err != nil {
		// A broken writer fails on every decision: its lines are budgeted
		// like the decisions'.
		if ok, suppressed := o.budget.admit("metrics error"); ok {
			attrs := []slog.Attr{slog.String("error", err.Error())}
			if suppressed > 0 {
				attrs = append(attrs, slog.Int64(attrSuppressed, suppressed))
			}
			o.logger.LogAttrs(ctx, slog.LevelError, "write metrics failed", attrs...)
		}
	}
	o.logDecision(ctx, rec, outcome, state)
}

// decisionLevel is the level of a decision's log line: allowed Debug (not
// written at the default level), denied Info (the limiter doing its job),
// degraded and unauthorized Warn (Redis is failing; a caller presented a
// bad credential), and Error for a request that could not be decided (a
// fail-closed route with Redis unavailable, limits that cannot be
// decided).
func decisionLevel(outcome string, rec decisionRecord) slog.Level {
	switch {
	case rec.err != nil:
		return slog.LevelError
	case outcome == OutcomeAllowed:
		return slog.LevelDebug
	case outcome == OutcomeDenied:
		return slog.LevelInfo
	default:
		return slog.LevelWarn
	}
}

// decisionReason says why a decision's outcome is what it is, and names
// the log budget its line spends: one per outcome and reason, a fixed set
// of six. Lines any caller can cause at will (a spray of unknown keys or
// forged tokens, rejected at Warn) then never use up the budget of the
// lines an operator must see (a fail-closed route Redis could not decide,
// rejected at Error), though both are "rejected".
func decisionReason(outcome string, rec decisionRecord) (reason, budget string) {
	switch {
	case rec.err != nil && errors.Is(rec.err, ratelimit.ErrUnavailable):
		return ReasonUnavailable, OutcomeRejected + ": " + ReasonUnavailable
	case rec.err != nil:
		return ReasonUndecidable, OutcomeRejected + ": " + ReasonUndecidable
	case rec.out.Unauthorized:
		return ReasonUnauthorized, OutcomeRejected + ": " + ReasonUnauthorized
	case outcome == OutcomeDegraded:
		return ReasonFallback, OutcomeDegraded + ": " + ReasonFallback
	case outcome == OutcomeAllowed:
		return ReasonWithinLimit, OutcomeAllowed + ": " + ReasonWithinLimit
	default:
		return ReasonOverLimit, OutcomeDenied + ": " + ReasonOverLimit
	}
}

// logDecision writes a decision's line, if its level is enabled and the
// budget of its outcome and reason allows. Nothing is built for a line
// that is not written. The line names the caller by tier and hashed
// identity only: never a key, token, user id or IP.
func (o *decisionObserver) logDecision(ctx context.Context, rec decisionRecord, outcome, breakerState string) {
	level := decisionLevel(outcome, rec)
	if !o.logger.Enabled(ctx, level) {
		return
	}
	reason, budget := decisionReason(outcome, rec)
	ok, suppressed := o.budget.admit(budget)
	if !ok {
		return
	}
	out, req := rec.out, rec.req
	var buf [24]slog.Attr
	attrs := append(buf[:0],
		slog.String("outcome", outcome),
		slog.String("reason", reason),
		slog.String("tier", out.Caller.Tier),
		slog.String("identity", identityHash(out.Caller)),
		slog.String("route", RouteName(req)),
		slog.Bool("allowed", out.Result.Allowed && rec.err == nil),
	)
	if len(out.Result.Decisions) > 0 {
		d := out.Result.Closest()
		attrs = append(attrs,
			slog.String("limitName", d.Limit.Name),
			slog.Int64("limit", d.Limit.Count),
			slog.Int64("window", wire.CeilSeconds(d.Limit.Window)),
			slog.Int64("remaining", d.Remaining),
		)
		if !out.Result.Allowed {
			attrs = append(attrs, slog.Int64("retryAfter", wire.RetryAfterSeconds(out.Result.RetryAfter())))
		}
	}
	if out.Unauthorized {
		attrs = append(attrs, slog.Bool("unauthorized", true))
	}
	if rec.credential != "" {
		attrs = append(attrs, slog.String("credential", clip(rec.credential, maxReasonLen)))
	}
	if out.FailClosed {
		attrs = append(attrs, slog.Bool("failClosed", true))
	}
	attrs = append(attrs, slog.Float64("latencyMs", millis(rec.latency)))
	if out.Result.RedisLatency > 0 {
		attrs = append(attrs, slog.Float64("redisMs", millis(out.Result.RedisLatency)))
	}
	if out.Result.Degraded && out.Result.Cause != nil {
		// The Redis client's own words (refused, timeout, NOAUTH,
		// WRONGPASS, breaker open): no caller, no credential.
		attrs = append(attrs, slog.String("redisError", clip(out.Result.Cause.Error(), maxRedisErrorLen)))
	}
	if breakerState != breakerClosed {
		attrs = append(attrs, slog.String("breakerState", breakerState))
	}
	if req.RequestID != "" {
		attrs = append(attrs, slog.String("requestId", clip(req.RequestID, maxRequestIDLen)))
	}
	if req.LambdaRequestID != "" {
		attrs = append(attrs, slog.String("lambdaRequestId", clip(req.LambdaRequestID, maxRequestIDLen)))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64(attrSuppressed, suppressed))
	}
	if rec.err != nil {
		attrs = append(attrs, slog.String("error", clip(rec.err.Error(), maxErrorLen)))
	}
	o.logger.LogAttrs(ctx, level, DecisionMessage, attrs...)
}

// identityHash is how a caller's identity appears in a log line.
func identityHash(c Caller) string {
	if c.Hash == "" {
		return IdentityHashUnavailable
	}
	return c.Hash
}

// maxInvalidSourceLen bounds how much of a source address that does not
// parse is quoted in the log.
const maxInvalidSourceLen = 64

// invalidSource logs, within its own budget, a source address that does
// not parse: the request is counted in the one bucket all such addresses
// share ("ip:invalid"). API Gateway always sends an address; the console's
// test invocations send "test-invoke-source-ip".
func (o *decisionObserver) invalidSource(ctx context.Context, sourceIP string) {
	ok, suppressed := o.budget.admit("invalid source ip")
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("sourceIp", clip(sourceIP, maxInvalidSourceLen))}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64(attrSuppressed, suppressed))
	}
	o.logger.LogAttrs(ctx, slog.LevelWarn, "source IP is not an IP address; counted in the anonymous bucket every such address shares (ip:invalid)", attrs...)
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// RouteName is how a request's route is logged and named in errors: an HTTP API's route key
// when it names one (a template like "POST /auth/{proxy+}", never the
// caller's path), else the method and the path (for REST the resource,
// LimitPath), clipped and without any query string.
func RouteName(req Request) string {
	if req.RouteKey != "" && req.RouteKey != "$default" {
		return clip(req.RouteKey, maxMethodLen+1+maxPathLen)
	}
	path, _, _ := strings.Cut(req.Path, "?")
	return clip(req.Method, maxMethodLen) + " " + clip(path, maxPathLen)
}
