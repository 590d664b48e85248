//go:build !noxray && !otel

package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-xray-sdk-go/strategy/ctxmissing"
	"github.com/aws/aws-xray-sdk-go/xray"
	"github.com/aws/aws-xray-sdk-go/xraylog"
	"github.com/redis/go-redis/v9"
)

// Tracer names the tracer this build sends to: "x-ray", the default build
// (without the build tag noxray).
const Tracer = "x-ray"

// Configure sets up the X-Ray SDK for the process: its logger (see
// Options.Logger), where it sends (Options.DaemonAddr), and a missing
// segment that is ignored rather than logged or turned into a panic.
//
// The SDK keeps this configuration in package variables, as go-redis does
// its logger: call Configure once, in main, before the first traced call
// and before anything else uses the SDK. Configure sends nothing and waits
// for no daemon. A process that never calls it still traces, with the
// SDK's defaults, which log to stdout in plain text.
func Configure(opts Options) error {
	var sdkLog xraylog.Logger = xraylog.NullLogger
	if opts.Logger != nil {
		sdkLog = sdkLogger{l: opts.Logger}
	}
	// Before xray.Configure, which logs the daemon address it picks.
	xray.SetLogger(sdkLog)
	err := xray.Configure(xray.Config{
		DaemonAddr:             opts.DaemonAddr,
		ContextMissingStrategy: ctxmissing.NewDefaultIgnoreErrorStrategy(),
	})
	if err != nil {
		return fmt.Errorf("configure x-ray (daemon address %q): %w", opts.DaemonAddr, err)
	}
	return nil
}

// Instrument adds the tracing hook to client: from then on each of its
// Redis calls is one subsegment when its context is traced (see the package
// documentation). Call it once per client, before the client is shared.
//
// On a cluster client the hook sits on the cluster client itself, not on
// its node clients, so one call is one subsegment however many nodes it
// visits: a MOVED or ASK redirection go-redis follows stays inside it.
// Commands sent to a node client directly (ForEachShard callbacks, such as
// Limiter.LoadScripts at cold start) are not traced.
func Instrument(client redis.UniversalClient) {
	client.AddHook(redisHook{})
}

// traced reports whether a Redis call on ctx is to be traced: the context
// holds an X-Ray segment, or the Lambda trace header of a sampled
// invocation. It only looks values up in ctx and allocates nothing, so
// that untraced calls (every call outside Lambda, and the invocations
// Lambda does not sample) cost next to nothing.
//
// A header that does not say Sampled=1 would give the SDK an unsampled
// facade segment, whose subsegments are never sent: skipping it changes
// nothing but the cost.
func traced(ctx context.Context) bool {
	if xray.GetSegment(ctx) != nil {
		return true
	}
	header, _ := ctx.Value(xray.LambdaTraceHeaderKey).(string)
	return strings.Contains(header, "Sampled=1")
}

// sdkLogger routes the X-Ray SDK's messages to slog at debug level,
// whatever level the SDK gives them: a daemon that is not there (tests, a
// local run with a trace header) makes the SDK log errors on every send,
// and tracing must stay silent then.
type sdkLogger struct {
	l *slog.Logger
}

// Log implements xraylog.Logger. The SDK's own debug messages (a whole
// segment document on every send) are dropped: they would multiply the
// debug log of every traced call.
func (s sdkLogger) Log(level xraylog.LogLevel, msg fmt.Stringer) {
	ctx := context.Background()
	if level < xraylog.LogLevelInfo || !s.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.l.LogAttrs(ctx, slog.LevelDebug, "x-ray sdk",
		slog.String("sdkLevel", level.String()),
		slog.String("detail", msg.String()))
}

// Handler returns the Lambda handler to start in place of h. Under X-Ray it
// is h itself: Lambda records the function's own segment (Tracing: Active)
// and gives every invocation's context the trace header, which is all the
// hook needs. It belongs to the seam because a tracer that must act around
// each invocation does not work that way: the OpenTelemetry build's
// Handler (otel.go) starts a span and flushes its exporter before Lambda
// freezes the process.
func Handler(h lambda.Handler) lambda.Handler {
	return h
}
