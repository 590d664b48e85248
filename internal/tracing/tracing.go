// Package tracing is slidegate's one seam to a tracer: today AWS X-Ray,
// through aws-xray-sdk-go, which no other package imports.
//
// The whole surface is four functions: Configure, once per process, and
// Handler, around the Lambda handler, both in main; Instrument, on the
// Redis client; WithTier, on the context of a decision. Each Redis call of
// an instrumented client (a command, or a pipeline as a whole) then becomes
// one X-Ray subsegment named "redis", in the "remote" namespace, annotated
// with the caller's tier and the call's outcome ("allowed" or "denied" for
// a decision script, "error", or "ok" for any other command), with the
// command's name (EVALSHA) as metadata. A failed call also carries its
// error, and the fault flag when Redis did not answer (timeout, refused
// connection) or the error flag when it answered with an error (NOSCRIPT).
// Keys and arguments are never recorded: they hold hashed identities and
// limits, and a trace is no place for either.
//
// A call is traced only when its context carries a sampled trace: an X-Ray
// segment (xray.BeginSegment, or an SDK HTTP handler), or the Lambda trace
// header that aws-lambda-go puts in every invocation's context (key
// "x-amzn-trace-id", with "Sampled=1"; the SDK then builds a facade segment
// for the function's own segment, and each subsegment is sent on its own as
// it closes). Without one (tests, `make local`, the init phase, an
// invocation Lambda did not sample) the hook calls the next one directly,
// allocates nothing and the SDK never runs, so it cannot log either. With
// one, the SDK sends UDP datagrams to the X-Ray daemon (in Lambda, the one
// AWS_XRAY_DAEMON_ADDRESS names) and never waits for it: a missing daemon
// costs a failed write, logged by the SDK at debug level only.
//
// AWS ends support for the X-Ray SDKs on 2027-02-25. Moving to
// OpenTelemetry (go-redis's redisotel hooks, the otellambda wrapper, the
// X-Ray propagator and ID generator, an OTLP exporter to the ADOT
// collector; docs/observability.md has the plan) is a change in this
// package only: the four functions keep their signatures and their callers
// do not change.
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

// Options configure the tracer.
type Options struct {
	// Logger receives the SDK's own messages (the emitter's address, failed
	// writes to a missing daemon), every one at debug level: they are never
	// worth a production log line, and a function must stay quiet without
	// a daemon. Nil discards them.
	Logger *slog.Logger
	// DaemonAddr is where subsegments are sent: "host:port" (UDP), or
	// "tcp:host:port udp:host:port". Empty keeps the SDK's choice:
	// AWS_XRAY_DAEMON_ADDRESS, which Lambda sets when tracing is active,
	// or else 127.0.0.1:2000. When both are set, the variable wins (the
	// SDK's rule).
	DaemonAddr string
}

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

// Handler returns the Lambda handler to start in place of h. Under X-Ray it
// is h itself: Lambda records the function's own segment (Tracing: Active)
// and gives every invocation's context the trace header, which is all the
// hook needs. It belongs to the seam because a tracer that must act around
// each invocation does not work that way: OpenTelemetry starts a span and
// flushes its exporter before Lambda freezes the process
// (otellambda.WrapHandler), and with Handler already in main that stays a
// change in this package.
func Handler(h lambda.Handler) lambda.Handler {
	return h
}

// tierKey is the context key of the caller's tier.
type tierKey struct{}

// WithTier returns ctx carrying the tier of the decision about to be made
// ("anonymous", "user", "org"), which the subsegments of its Redis calls are
// annotated with. Call it before deciding, on the context the decision
// uses.
//
// When ctx carries no sampled trace, ctx is returned as it is: nothing
// would ever read the tier, and untraced decisions allocate nothing for
// tracing. The tier must therefore be set after the trace (segment or
// Lambda trace header) is in the context, which it always is in a Lambda
// handler.
func WithTier(ctx context.Context, tier string) context.Context {
	if tier == "" || !traced(ctx) {
		return ctx
	}
	return context.WithValue(ctx, tierKey{}, tier)
}

// tierFrom is the tier WithTier put in ctx, or "".
func tierFrom(ctx context.Context) string {
	tier, _ := ctx.Value(tierKey{}).(string)
	return tier
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
