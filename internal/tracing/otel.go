//go:build otel && !noxray

package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracer names the tracer this build sends to: "otel", OpenTelemetry over
// OTLP/HTTP, the build tag otel (`make build TRACER=otel`).
const Tracer = "otel"

// What the spans carry: the names of the X-Ray build's subsegment and
// annotations, so that one collector configuration (indexed_attributes:
// [tier, outcome]) gives the same X-Ray filter expressions, and the
// OpenTelemetry semantic conventions' names for the rest.
const (
	instrumentationName = "github.com/slidegate/slidegate/internal/tracing"
	redisSpanName       = "redis"
	defaultSpanName     = "slidegate"
	attrTier            = attribute.Key("tier")
	attrOutcome         = attribute.Key("outcome")
	attrDBSystem        = attribute.Key("db.system.name")
	attrDBOperation     = attribute.Key("db.operation.name")
	attrDBBatchSize     = attribute.Key("db.operation.batch.size")
	attrErrorType       = attribute.Key("error.type")
	attrInvocationID    = attribute.Key("faas.invocation_id")
	attrResourceID      = attribute.Key("cloud.resource_id")
)

// DefaultCollectorURL is where spans go when OTEL_EXPORTER_OTLP_ENDPOINT
// and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT are unset: the OTLP/HTTP receiver
// of the collector that the ADOT (or OpenTelemetry) Lambda layer runs as an
// extension next to the function.
const DefaultCollectorURL = "http://localhost:4318/v1/traces"

// FlushTimeout bounds the export at the end of a sampled invocation (see
// Handler): the spans go to the collector on loopback, which answers in
// well under a millisecond; a collector that does not answer within this
// costs the invocation this much at most, and its spans.
const FlushTimeout = 50 * time.Millisecond

// provider is what Configure set up: the SDK's tracer provider, batching
// spans to the OTLP exporter.
type provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	// spanName names each invocation's span: the function's name.
	spanName string
	logger   *slog.Logger
}

// current is the process's tracer, set by Configure (nil before: nothing
// is traced). Like the X-Ray SDK's configuration, it is process-wide.
var current atomic.Pointer[provider]

// Configure sets up OpenTelemetry for the process: a tracer provider that
// samples exactly the invocations Lambda sampled (a parent-based sampler
// that never starts a trace of its own), a batch span processor, and an
// OTLP/HTTP (protobuf) exporter to the collector in the function's
// environment, DefaultCollectorURL unless the standard variables
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT name
// another. The collector must be on loopback (localhost, 127.0.0.0/8,
// ::1): an endpoint elsewhere would put a network export on the request's
// path, and is refused, as is an OTLP protocol other than http/protobuf,
// the only one this build speaks. OTEL_SDK_DISABLED=true turns tracing
// off. Options.DaemonAddr is X-Ray's and is ignored.
//
// The SDK's own messages (a failed export) go to Options.Logger at debug
// level. Configure sends nothing and waits for no collector; calling it
// again replaces the provider, flushing the old one within FlushTimeout.
func Configure(opts Options) error {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	otel.SetLogger(logr.Discard())
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.LogAttrs(context.Background(), slog.LevelDebug, "opentelemetry sdk", slog.String("error", err.Error()))
	}))
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		replace(nil)
		return nil
	}
	endpoint, err := collectorURL(os.Getenv)
	if err != nil {
		replace(nil)
		return err
	}
	exporter, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithTimeout(FlushTimeout),
		// A retry would outlive the invocation: Lambda freezes the
		// process once it answers.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	)
	if err != nil {
		replace(nil)
		return fmt.Errorf("configure the otlp exporter (%s): %w", endpoint, err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())),
		sdktrace.WithBatcher(exporter, sdktrace.WithExportTimeout(FlushTimeout)),
		sdktrace.WithResource(lambdaResource(os.Getenv)),
	)
	name := os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	if name == "" {
		name = defaultSpanName
	}
	replace(&provider{tp: tp, tracer: tp.Tracer(instrumentationName), spanName: name, logger: logger})
	return nil
}

// replace makes p the process's tracer and shuts the previous one down,
// within FlushTimeout.
func replace(p *provider) {
	if old := current.Swap(p); old != nil {
		ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
		defer cancel()
		_ = old.tp.Shutdown(ctx)
	}
}

// collectorURL is the OTLP/HTTP traces endpoint to export to, from the
// standard variables, or why it is refused.
func collectorURL(getenv func(string) string) (string, error) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" && p != "http/protobuf" {
			return "", fmt.Errorf("%s=%q: this build exports OTLP over http/protobuf only", v, p)
		}
	}
	raw := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if raw == "" {
		if base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base != "" {
			raw = strings.TrimRight(base, "/") + "/v1/traces"
		}
	}
	if raw == "" {
		return DefaultCollectorURL, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("otlp endpoint %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("otlp endpoint %q: want an http:// or https:// URL", raw)
	}
	if !isLoopback(u.Hostname()) {
		return "", fmt.Errorf("otlp endpoint %q: the collector must run in the function's environment, on loopback (localhost:4318): exporting elsewhere would be a network call on the request's path", raw)
	}
	return u.String(), nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// lambdaResource describes the function (the variables Lambda sets),
// under the SDK's defaults and OTEL_RESOURCE_ATTRIBUTES/OTEL_SERVICE_NAME,
// which win.
func lambdaResource(getenv func(string) string) *resource.Resource {
	attrs := []attribute.KeyValue{
		attribute.String("cloud.provider", "aws"),
		attribute.String("cloud.platform", "aws_lambda"),
	}
	for key, v := range map[string]string{
		"cloud.region": "AWS_REGION",
		"faas.name":    "AWS_LAMBDA_FUNCTION_NAME",
		"service.name": "AWS_LAMBDA_FUNCTION_NAME",
		"faas.version": "AWS_LAMBDA_FUNCTION_VERSION",
	} {
		if value := getenv(v); value != "" {
			attrs = append(attrs, attribute.String(key, value))
		}
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return resource.Default()
	}
	if env, err := resource.Merge(res, resource.Environment()); err == nil {
		res = env
	}
	return res
}

// Handler returns h within a span per sampled invocation, joined to the
// trace Lambda passes (the trace header: its Root is the trace, its
// Parent, the function's own segment, the span's parent; Sampled=1 is
// Lambda's sampling decision, which this build follows). The span is of
// kind server, named after the function, with the invocation's request ID
// and function ARN, the tier of its decision and the decision's outcome
// (denied when any decision call denied, else allowed when any allowed,
// else error when a call failed); each Redis call of the decision is a
// child span (Instrument).
//
// When h returns, the span ends and the batch is flushed to the collector
// before the answer is returned, within FlushTimeout (less when the
// invocation's deadline is nearer): Lambda freezes the process as soon as
// it has the answer, and spans left in the batch would wait for the next
// invocation, or be lost with the environment. That flush is one OTLP/HTTP
// request to the collector extension on loopback, which queues the spans
// and sends them to X-Ray on its own; nothing leaves the function's
// environment on the request's path. An invocation Lambda did not sample,
// or whose header does not parse, runs h with no span and no flush.
func Handler(h lambda.Handler) lambda.Handler {
	return otelHandler{next: h}
}

// otelHandler is the Handler of this build.
type otelHandler struct {
	next lambda.Handler
}

// Invoke implements lambda.Handler.
func (o otelHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	p := current.Load()
	if p == nil {
		return o.next.Invoke(ctx, payload)
	}
	header, ok := parseTraceHeader(invocationTraceHeader(ctx))
	if !ok || !header.sampled {
		return o.next.Invoke(ctx, payload)
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    header.traceID,
		SpanID:     header.parentID,
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	attrs := make([]attribute.KeyValue, 0, 2)
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		if lc.AwsRequestID != "" {
			attrs = append(attrs, attrInvocationID.String(lc.AwsRequestID))
		}
		if lc.InvokedFunctionArn != "" {
			attrs = append(attrs, attrResourceID.String(lc.InvokedFunctionArn))
		}
	}
	inv := &invocation{}
	ctx, span := p.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, parent), p.spanName,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	out, err := o.next.Invoke(context.WithValue(ctx, invocationKey{}, inv), payload)
	span.SetAttributes(inv.attributes()...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	p.flush(ctx)
	return out, err
}

// flush exports what the batch holds, within FlushTimeout and the
// invocation's deadline. A failure is logged at debug level: the answer
// never waits longer, nor fails, for tracing.
func (p *provider) flush(ctx context.Context) {
	bound := FlushTimeout
	if deadline, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(deadline))
	}
	if bound <= 0 {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	if err := p.tp.ForceFlush(fctx); err != nil {
		p.logger.LogAttrs(ctx, slog.LevelDebug, "opentelemetry flush", slog.String("error", err.Error()))
	}
}

// invocationTraceHeader is the invocation's trace header: the value
// aws-lambda-go puts in its context, else (a handler run outside
// aws-lambda-go's loop) _X_AMZN_TRACE_ID, which aws-lambda-go also sets
// when the function serves one invocation at a time.
func invocationTraceHeader(ctx context.Context) string {
	//lint:ignore SA1029 aws-lambda-go's key is this plain string.
	if header, ok := ctx.Value("x-amzn-trace-id").(string); ok {
		return header
	}
	return os.Getenv("_X_AMZN_TRACE_ID")
}

// invocationKey is the context key of the invocation's *invocation.
type invocationKey struct{}

// invocation gathers, from the Redis calls of one invocation, what its
// span says of the decision.
type invocation struct {
	mu   sync.Mutex
	tier string
	rank int // 0 none, then error, allowed, denied: the highest wins
}

// outcomeRanks order the outcomes of a decision's calls: a denial is the
// decision's outcome whatever else happened, and an error only when no
// call decided (a NOSCRIPT before the EVAL that decides is not the
// decision's outcome).
var outcomeRanks = []string{"", outcomeError, outcomeAllowed, outcomeDenied}

// note records one call.
func (inv *invocation) note(call tracedCall) {
	rank := 0
	for i, o := range outcomeRanks {
		if o == call.outcome {
			rank = i
		}
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if call.tier != "" {
		inv.tier = call.tier
	}
	inv.rank = max(inv.rank, rank)
}

// attributes are the invocation span's tier and outcome, those known.
func (inv *invocation) attributes() []attribute.KeyValue {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	var attrs []attribute.KeyValue
	if inv.tier != "" {
		attrs = append(attrs, attrTier.String(inv.tier))
	}
	if inv.rank > 0 {
		attrs = append(attrs, attrOutcome.String(outcomeRanks[inv.rank]))
	}
	return attrs
}

// Instrument adds the tracing hook to client: from then on each of its
// Redis calls made within a sampled invocation is one span, a child of the
// invocation's (see Handler). Call it once per client, before the client
// is shared. As in the X-Ray build, a cluster call is one span however many
// nodes it visits, and commands sent to node clients directly are not
// traced.
func Instrument(client redis.UniversalClient) {
	client.AddHook(redisHook{})
}

// traced reports whether a Redis call on ctx is to be traced: ctx holds a
// recording span, which only a sampled invocation's does. It allocates
// nothing.
func traced(ctx context.Context) bool {
	return trace.SpanFromContext(ctx).IsRecording()
}

// callSpan is what the hook records a call on: an OpenTelemetry span.
type callSpan = trace.Span

// beginCall starts the span of a call and returns it with the context to
// run the call in, or nil when the call is not to be traced: its context
// holds no recording span, or it is part of a call already traced (a new
// connection's HELLO, run through the hooks with the context of the
// command that dialed).
func beginCall(ctx context.Context) (callSpan, context.Context) {
	if !traced(ctx) || ctx.Value(callKey{}) != nil {
		return nil, ctx
	}
	p := current.Load()
	if p == nil {
		return nil, ctx
	}
	callCtx, span := p.tracer.Start(ctx, redisSpanName, trace.WithSpanKind(trace.SpanKindClient))
	return span, context.WithValue(callCtx, callKey{}, true)
}

// finish records call on its span, and on its invocation's, and ends it.
func finish(ctx context.Context, span callSpan, call tracedCall) {
	attrs := []attribute.KeyValue{
		attrDBSystem.String("redis"),
		attrDBOperation.String(call.command),
		attrOutcome.String(call.outcome),
	}
	if call.tier != "" {
		attrs = append(attrs, attrTier.String(call.tier))
	}
	if call.commands > 0 {
		attrs = append(attrs, attrDBBatchSize.Int(call.commands))
	}
	if call.cause != nil {
		// X-Ray's fault (Redis did not answer, or cannot serve) and error
		// (Redis refused this call, or the caller gave up).
		kind := "error"
		if isFault(call.cause) {
			kind = "fault"
		}
		attrs = append(attrs, attrErrorType.String(kind))
		span.RecordError(call.cause)
		span.SetStatus(codes.Error, call.cause.Error())
	}
	span.SetAttributes(attrs...)
	span.End()
	if inv, ok := ctx.Value(invocationKey{}).(*invocation); ok {
		inv.note(call)
	}
}
