//go:build noxray && otel

package tracing

// The build tags noxray and otel each pick a tracer (TRACER=none and
// TRACER=otel): a build with both is refused here, by name, rather than
// with one tracer silently winning.
var _ = buildTagsNoxrayAndOtelPickTwoTracers
