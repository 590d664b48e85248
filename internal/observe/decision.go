package observe

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/internal/version"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Bounds of caller-chosen text in a log line or a metric property.
const (
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
	ReasonShadowDenied = "over a shadow limit only: admitted"
	ReasonBlocked      = "blocked network"
	ReasonUnlimited    = "unlimited network"
	// ReasonControlBlocked: a live block on the caller's identity or its
	// network refused the request.
	ReasonControlBlocked = "blocked by a live control"
	// ReasonControlExempt: a live exemption on the caller's network lifted
	// its limits.
	ReasonControlExempt = "network exempt by a live control"
)

// Observation is what is observed of one request's outcome, decided by
// a decision that spent (or by its source network alone).
type Observation struct {
	// Request is the request decided: its route and request ids are
	// logged, never its headers, source address or path parameters.
	Request apigw.Request
	// Outcome is the decision; its Kind names the outcome, the reason and
	// the level of the line.
	Outcome apigw.Outcome
	// Credential is the identity resolver's note on a presented
	// credential that earned nothing ("unknown api key", "bearer token:
	// ..."); empty otherwise.
	Credential string
	// Err is the decision's error, when Outcome.Kind is Unavailable or
	// Undecidable.
	Err error
	// Latency is how long the decision took, identity and Redis included.
	Latency time.Duration
}

// Observer publishes decisions: one EMF record each on the metrics
// writer, never sampled, and one log line each within the log level and
// the log budget. It is safe for concurrent use.
type Observer struct {
	logger  *slog.Logger
	budget  *logBudget     // nil: every line within the level is written
	metrics *metricsWriter // nil: no metrics
	breaker *breakerWatch
	// version is the binary's (internal/version), on every decision line:
	// a field, not an EMF dimension, since a dimension would multiply the
	// metrics (and their cost) by the versions live during a deployment.
	version string
}

// New returns an observer logging on logger within sampling and writing
// metrics on w (nothing when w is io.Discard).
func New(logger *slog.Logger, w io.Writer, sampling LogSampling) *Observer {
	return &Observer{
		logger:  logger,
		budget:  newLogBudget(sampling),
		metrics: newMetricsWriter(w),
		breaker: newBreakerWatch(),
		version: version.Version(),
	}
}

// BreakerChanged is the ratelimit.GateOptions.OnBreakerStateChange of the
// gates whose decisions o publishes: the next record carries the change.
func (o *Observer) BreakerChanged(from, to string) { o.breaker.changed(from, to) }

// Observe publishes one outcome: metrics first, whatever the log does.
// Both name it by its Kind (apigw.Kind.String).
func (o *Observer) Observe(ctx context.Context, rec Observation) {
	outcome := rec.Outcome.Kind.String()
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
			tier:            rec.Outcome.Caller.Tier,
			outcome:         outcome,
			control:         rec.Outcome.Control(),
			malformed:       rec.Outcome.Result.Control.Malformed,
			decisionLatency: rec.Latency,
			redisLatency:    rec.Outcome.Result.RedisLatency,
			requestID:       truncate.Text(rec.Request.RequestID, maxRequestIDLen),
			lambdaRequestID: truncate.Text(rec.Request.LambdaRequestID, maxRequestIDLen),
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
	if rec.Outcome.Result.Control.Malformed {
		o.malformedControl(ctx, rec)
	}
	o.logDecision(ctx, rec, outcome, state)
}

// malformedControl logs, at Warn and within its own budget, a decision
// that found a live control record it could not read on the caller's
// identity: the record was ignored and the decision made as without it
// (never a block lifted into an unlimited caller: the caller's own limits
// applied). The caller is named by its hashed identity only.
func (o *Observer) malformedControl(ctx context.Context, rec Observation) {
	ok, suppressed := o.budget.admit("malformed control")
	if !ok {
		return
	}
	attrs := []slog.Attr{
		slog.String("tier", rec.Outcome.Caller.Tier),
		slog.String("identity", identityHash(rec.Outcome)),
		slog.String("route", apigw.RouteName(rec.Request)),
	}
	if rec.Request.RequestID != "" {
		attrs = append(attrs, slog.String("requestId", truncate.Text(rec.Request.RequestID, maxRequestIDLen)))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64(attrSuppressed, suppressed))
	}
	o.logger.LogAttrs(ctx, slog.LevelWarn, MalformedControlMessage, attrs...)
}

// MalformedControlMessage is the message of the line that reports a live
// control record a decision could not read and ignored.
const MalformedControlMessage = "malformed live control record ignored; the caller's limits applied as without it (lift it or set it again with slidegate)"

// NetworkControlsUnread logs, at Warn and within its own budget, a read
// of the live network controls that failed or was not whole (err, from
// controls.NetworkControlCache.Get): the last list read stays in force.
func (o *Observer) NetworkControlsUnread(ctx context.Context, err error) {
	ok, suppressed := o.budget.admit("network controls")
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("error", truncate.Text(err.Error(), maxErrorLen))}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64(attrSuppressed, suppressed))
	}
	o.logger.LogAttrs(ctx, slog.LevelWarn, "read live network controls: the last list read stays in force", attrs...)
}

// level is the level of a decision's log line: allowed Debug (not
// written at the default level), denied Info (the limiter doing its job),
// degraded and unauthorized Warn (Redis is failing; a caller presented a
// bad credential), and Error for a request that could not be decided (a
// fail-closed route with Redis unavailable, limits that cannot be
// decided).
func level(k apigw.Kind) slog.Level {
	switch k {
	case apigw.Unavailable, apigw.Undecidable:
		return slog.LevelError
	case apigw.Allowed, apigw.Unlimited:
		return slog.LevelDebug
	case apigw.Denied, apigw.ShadowDenied, apigw.Blocked:
		return slog.LevelInfo
	default:
		return slog.LevelWarn
	}
}

// reason says why a decision's outcome is what it is, with the live
// control that changed it. It also names the log budget the line spends:
// each reason belongs to one outcome, so the budgets are per outcome and
// reason.
func reason(k apigw.Kind, c controls.Applied) string {
	switch {
	case (k == apigw.Denied || k == apigw.Blocked) && c.Kind == controls.Block:
		return ReasonControlBlocked
	case k == apigw.Unlimited && c.Kind == controls.Exempt:
		return ReasonControlExempt
	}
	switch k {
	case apigw.Unavailable:
		return ReasonUnavailable
	case apigw.Undecidable:
		return ReasonUndecidable
	case apigw.Unauthorized, apigw.UnauthorizedOverLimit:
		return ReasonUnauthorized
	case apigw.Degraded:
		return ReasonFallback
	case apigw.Allowed:
		return ReasonWithinLimit
	case apigw.ShadowDenied:
		return ReasonShadowDenied
	case apigw.Blocked:
		return ReasonBlocked
	case apigw.Unlimited:
		return ReasonUnlimited
	default:
		return ReasonOverLimit
	}
}

// logDecision writes a decision's line, if its level is enabled and the
// budget of its outcome and reason allows. Nothing is built for a line
// that is not written. The line names the caller by tier and hashed
// identity only: never a key, token, user id or IP.
//
// Its log budget is one per outcome and reason, a fixed set. Lines
// any caller can cause at will (a spray of unknown keys or forged tokens,
// rejected at Warn) then never use up the budget of the lines an operator
// must see (a fail-closed route Redis could not decide, rejected at
// Error), though both are "rejected".
func (o *Observer) logDecision(ctx context.Context, rec Observation, outcome, breakerState string) {
	kind := rec.Outcome.Kind
	lvl := level(kind)
	if !o.logger.Enabled(ctx, lvl) {
		return
	}
	why := reason(kind, rec.Outcome.Result.Control)
	ok, suppressed := o.budget.admit(why)
	if !ok {
		return
	}
	out, req := rec.Outcome, rec.Request
	var buf [28]slog.Attr
	attrs := append(buf[:0],
		slog.String("outcome", outcome),
		slog.String("reason", why),
		slog.String("tier", out.Caller.Tier),
		slog.String("identity", identityHash(out)),
		slog.String("route", apigw.RouteName(req)),
		slog.Bool("allowed", out.Result.Allowed && rec.Err == nil),
		slog.String("version", o.version),
	)
	if len(out.Result.Decisions) > 0 {
		d := httplimit.Closest(out.Result)
		attrs = append(attrs,
			slog.String("limitName", d.Limit.Name),
			slog.Int64("limit", d.Limit.Count),
			slog.Int64("window", httplimit.WindowSeconds(d.Limit)),
			slog.Int64("remaining", d.Remaining),
		)
		if !out.Result.Allowed {
			attrs = append(attrs, slog.Int64("retryAfter", httplimit.RetryAfterSeconds(out.Result.RetryAfter())))
		}
	}
	if out.Plan != "" {
		attrs = append(attrs, slog.String("plan", out.Plan))
	}
	if name := out.Control(); name != "" {
		attrs = append(attrs, slog.String("control", name),
			slog.String("controlUntil", out.Result.Control.Until.UTC().Format(time.RFC3339)))
		if out.Result.Control.Kind == controls.Scale {
			attrs = append(attrs, slog.Float64("controlFactor", out.Result.Control.Factor))
		}
	}
	if out.Kind == apigw.ShadowDenied {
		attrs = append(attrs, slog.String("shadowLimits", truncate.Text(out.ShadowDenials(), maxReasonLen)))
	}
	if out.Unauthorized() {
		attrs = append(attrs, slog.Bool("unauthorized", true))
	}
	if rec.Credential != "" {
		attrs = append(attrs, slog.String("credential", truncate.Text(rec.Credential, maxReasonLen)))
	}
	if out.FailClosed {
		attrs = append(attrs, slog.Bool("failClosed", true))
	}
	attrs = append(attrs, slog.Float64("latencyMs", millis(rec.Latency)))
	if out.Result.RedisLatency > 0 {
		attrs = append(attrs, slog.Float64("redisMs", millis(out.Result.RedisLatency)))
	}
	if out.Result.Degraded && out.Result.Cause != nil {
		// The Redis client's own words (refused, timeout, NOAUTH,
		// WRONGPASS, breaker open): no caller, no credential.
		attrs = append(attrs, slog.String("redisError", truncate.Text(out.Result.Cause.Error(), maxRedisErrorLen)))
	}
	if breakerState != breakerClosed {
		attrs = append(attrs, slog.String("breakerState", breakerState))
	}
	if req.RequestID != "" {
		attrs = append(attrs, slog.String("requestId", truncate.Text(req.RequestID, maxRequestIDLen)))
	}
	if req.LambdaRequestID != "" {
		attrs = append(attrs, slog.String("lambdaRequestId", truncate.Text(req.LambdaRequestID, maxRequestIDLen)))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64(attrSuppressed, suppressed))
	}
	if rec.Err != nil {
		attrs = append(attrs, slog.String("error", truncate.Text(rec.Err.Error(), maxErrorLen)))
	}
	o.logger.LogAttrs(ctx, lvl, DecisionMessage, attrs...)
}

// identityHash is how a caller's identity appears in a log line.
func identityHash(o apigw.Outcome) string {
	if o.IdentityHash == "" {
		return apigw.IdentityHashUnavailable
	}
	return o.IdentityHash
}

// maxInvalidSourceLen bounds how much of a source address that does not
// parse is quoted in the log.
const maxInvalidSourceLen = 64

// InvalidSource logs, within its own budget, a source address that does
// not parse: the request is counted in the one bucket all such addresses
// share ("ip:invalid"). API Gateway always sends an address; the console's
// test invocations send "test-invoke-source-ip".
func (o *Observer) InvalidSource(ctx context.Context, sourceIP string) {
	ok, suppressed := o.budget.admit("invalid source ip")
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("sourceIp", truncate.Text(sourceIP, maxInvalidSourceLen))}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64(attrSuppressed, suppressed))
	}
	o.logger.LogAttrs(ctx, slog.LevelWarn, "source IP is not an IP address; counted in the anonymous bucket every such address shares (ip:invalid)", attrs...)
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
