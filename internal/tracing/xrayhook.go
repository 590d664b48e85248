//go:build !noxray && !otel

package tracing

import (
	"context"

	"github.com/aws/aws-xray-sdk-go/xray"
)

// What the subsegment of a Redis call carries. X-Ray annotations (indexed,
// usable in filter expressions: annotation.outcome = "denied") hold the tier
// and the outcome; metadata (not indexed) holds the command's name.
const (
	subsegmentName    = "redis"
	namespaceRemote   = "remote"
	annotationTier    = "tier"
	annotationOutcome = "outcome"
	metadataNamespace = "redis"
	metadataCommand   = "command"
	metadataCommands  = "commands"
)

// callSpan is what the hook records a call on: an X-Ray subsegment.
type callSpan = *xray.Segment

// beginCall starts the subsegment of a call and returns it with the context
// to run the call in, or nil when the call is not to be traced: its
// context carries no sampled trace, or it is part of a call already traced.
// go-redis runs a new connection's setup (HELLO) through the hooks, with
// the context of the command that dialed it, and a hook added to node
// clients as well (ClusterClient.OnNewNode) would see each node's share of
// a cluster call: neither is a call of its own.
func beginCall(ctx context.Context) (callSpan, context.Context) {
	if !traced(ctx) || ctx.Value(callKey{}) != nil {
		return nil, ctx
	}
	subCtx, seg := xray.BeginSubsegment(ctx, subsegmentName)
	if seg == nil {
		return nil, ctx
	}
	return seg, context.WithValue(subCtx, callKey{}, seg)
}

// finish records call on its subsegment and closes it. ctx is the
// context the call was made on.
func finish(_ context.Context, seg callSpan, call tracedCall) {
	seg.Lock()
	seg.Namespace = namespaceRemote
	seg.Unlock()
	// These fail only for annotation values that are not strings, numbers
	// or booleans: never for ours.
	if call.tier != "" {
		_ = seg.AddAnnotation(annotationTier, call.tier)
	}
	_ = seg.AddAnnotation(annotationOutcome, call.outcome)
	_ = seg.AddMetadataToNamespace(metadataNamespace, metadataCommand, call.command)
	if call.commands > 0 {
		_ = seg.AddMetadataToNamespace(metadataNamespace, metadataCommands, call.commands)
	}
	if call.cause != nil {
		// AddError records the exception and marks a fault; a failure that
		// is not the server's is an error instead.
		_ = seg.AddError(call.cause)
		if !isFault(call.cause) {
			seg.Lock()
			seg.Fault, seg.Error = false, true
			seg.Unlock()
		}
	}
	seg.Close(nil)
}
