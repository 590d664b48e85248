package observe

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Metrics and log values of the in-flight limits (RATE_LIMIT_CONCURRENCY).
const (
	// MetricInFlight is, on each request that takes its slots, how many
	// of its caller's requests are in flight with it (None), by tier: its
	// Maximum is the busiest caller of the tier, its SampleCount the
	// requests that took slots.
	MetricInFlight = "InFlight"
	// MetricConcurrencyDenials is 1 per request refused because one of
	// its in-flight limits was full (Count), by tier.
	MetricConcurrencyDenials = "ConcurrencyDenials"
	// ReasonOverInFlight is the reason of the decision line of such a
	// request; its limitKind is LimitKindConcurrency.
	ReasonOverInFlight = "over in-flight limit"
	// LimitKindConcurrency marks the decision lines of in-flight limits
	// (limitKind), which the Contributor Insights rules key on.
	LimitKindConcurrency = "concurrency"
)

// InFlight publishes the in-flight count of a caller of tier that just
// took its slots: the largest Held of them.
func (o *Observer) InFlight(tier string, held []ratelimit.Slot) {
	var n int64
	for _, s := range held {
		n = max(n, s.Held)
	}
	o.writeConcurrencyMetric(tier, MetricInFlight, "None", n)
}

// ConcurrencyDenied publishes a request refused by a full in-flight
// limit: one EMF record, and one decision line (Info, outcome denied)
// within the log budget, naming the caller by tier and hashed identity.
func (o *Observer) ConcurrencyDenied(ctx context.Context, req apigw.Request, tier, identityHash string, slot ratelimit.Slot) {
	o.writeConcurrencyMetric(tier, MetricConcurrencyDenials, "Count", 1)
	if !o.logger.Enabled(ctx, slog.LevelInfo) {
		return
	}
	ok, suppressed := o.budget.admit(apigw.Denied.String() + ": " + ReasonOverInFlight)
	if !ok {
		return
	}
	if identityHash == "" {
		identityHash = apigw.IdentityHashUnavailable
	}
	attrs := []slog.Attr{
		slog.String("outcome", apigw.Denied.String()),
		slog.String("reason", ReasonOverInFlight),
		slog.String("limitKind", LimitKindConcurrency),
		slog.String("tier", tier),
		slog.String("identity", identityHash),
		slog.String("route", apigw.RouteName(req)),
		slog.Bool("allowed", false),
		slog.String("limitName", slot.Limit.Name),
		slog.Int64("limit", slot.Limit.Max),
		slog.Int64("inFlight", slot.Held),
		slog.Int64("retryAfter", httplimit.RetryAfterSeconds(slot.RetryAfter)),
	}
	if slot.Degraded {
		attrs = append(attrs, slog.Bool("degraded", true))
	}
	if slot.RedisLatency > 0 {
		attrs = append(attrs, slog.Float64("redisMs", millis(slot.RedisLatency)))
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
	o.logger.LogAttrs(ctx, slog.LevelInfo, DecisionMessage, attrs...)
}

// writeConcurrencyMetric writes one EMF record of one metric by tier. A
// writer error is left to the decision records, which report it.
func (o *Observer) writeConcurrencyMetric(tier, name, unit string, value int64) {
	m := o.metrics
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := append(m.buf[:0], emfHead...)
	b = strconv.AppendInt(b, time.Now().UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":"`+MetricsNamespace+`","Dimensions":[["`+emfTier+`"]],"Metrics":[{"Name":"`...)
	b = append(b, name...)
	b = append(b, `","Unit":"`...)
	b = append(b, unit...)
	b = append(b, `"}]}]}`...)
	b = appendStringMember(b, emfTier, nonEmpty(tier))
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	b = strconv.AppendInt(b, value, 10)
	b = append(b, "}\n"...)
	m.buf = b
	_, _ = m.w.Write(b)
}
