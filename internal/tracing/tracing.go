// Package tracing is slidegate's one seam to a tracer: by default AWS
// X-Ray, through aws-xray-sdk-go, which no other package imports.
//
// The whole surface is four functions: Configure, once per process, from
// instance.NewFunctionRuntime (which each function's main calls first);
// Handler, around the Lambda handler, in each function's main; Instrument,
// on the Runtime's Redis client (instance.NewRuntime); WithTier, on the context
// of a decision (instance.Runtime's Decide and Quota). Each Redis call of
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
// AWS ends support for the X-Ray SDKs on 2027-02-25. Built with the tag
// otel (`make build TRACER=otel`), the package has the same four functions
// on OpenTelemetry instead (otel.go): Handler starts a span per sampled
// invocation, joined to the trace of its Lambda trace header
// (traceheader.go), and flushes it, bounded, to the collector of the ADOT
// Lambda layer on localhost over OTLP/HTTP; each Redis call is a child span
// with the same names and attributes as the X-Ray subsegment. The go-redis
// hook (redishook.go) is the two tracers' own, each supplying how a call's
// span begins and ends (xrayhook.go, otel.go). docs/observability.md says
// when to move.
//
// The X-Ray implementation (xray.go, xrayhook.go, redishook.go) is the
// default build. Built with the tag noxray (`make build TRACER=none`), the
// package has the same four functions doing nothing (noxray.go): no hook
// on the client, no subsegment ever, and neither the X-Ray SDK nor the
// aws-sdk-go v1 and gRPC packages it pulls in are linked, which makes the
// bootstrap smaller and its initialisation shorter. The tags noxray and
// otel exclude each other (conflict.go). Tracer names the build's tracer.
package tracing

import (
	"context"
	"log/slog"
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
	// SDK's rule). The X-Ray build's only: the otel build reads the
	// OTEL_EXPORTER_OTLP_* variables instead (see its Configure).
	DaemonAddr string
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
