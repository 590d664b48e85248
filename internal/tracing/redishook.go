//go:build !noxray

package tracing

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-xray-sdk-go/xray"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit"
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
	pipelineCommand   = "PIPELINE"
)

// Outcomes of one Redis call, the values of its outcome annotation
// (docs/observability.md).
const (
	// outcomeAllowed: a decision script answered that every limit of the
	// call admits the cost (and, unless it was a peek, spent it).
	outcomeAllowed = "allowed"
	// outcomeDenied: a decision script answered that some limit of the
	// call does not admit the cost; nothing was spent.
	outcomeDenied = "denied"
	// outcomeError: the command failed (no reply, or an error reply such
	// as NOSCRIPT), or a decision script's reply is not a decision.
	outcomeError = "error"
	// outcomeOK: any other command that succeeded (SCRIPT LOAD, PING, ...).
	outcomeOK = "ok"
)

// commandOutcome classifies a command that has run: a decision script by
// its verdict (ratelimit.DecisionReply, which knows the scripts), any other
// command by whether it failed. redis.Nil (a missing key) is an answer,
// not a failure.
func commandOutcome(cmd redis.Cmder) string {
	if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return outcomeError
	}
	allowed, ours, err := ratelimit.DecisionReply(cmd)
	switch {
	case !ours:
		return outcomeOK
	case err != nil:
		return outcomeError
	case allowed:
		return outcomeAllowed
	default:
		return outcomeDenied
	}
}

// redisHook is the go-redis hook behind Instrument: one subsegment per
// traced call, nothing at all for an untraced one.
type redisHook struct{}

// DialHook passes dialing through: a dial happens inside a call, whose
// subsegment already covers it.
func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook wraps one command in a subsegment.
func (redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		seg, callCtx := beginCall(ctx)
		if seg == nil {
			return next(ctx, cmd)
		}
		err := next(callCtx, cmd)
		call := tracedCall{tier: tierFrom(ctx), command: strings.ToUpper(cmd.Name()), outcome: outcomeError}
		if failed(err) {
			call.cause = err
		} else {
			call.outcome = commandOutcome(cmd)
		}
		finish(seg, call)
		return err
	}
}

// ProcessPipelineHook wraps a pipeline (or a transaction) in one
// subsegment: it is one round trip.
func (redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		seg, callCtx := beginCall(ctx)
		if seg == nil {
			return next(ctx, cmds)
		}
		err := next(callCtx, cmds)
		call := tracedCall{tier: tierFrom(ctx), command: pipelineCommand, commands: len(cmds)}
		call.outcome, call.cause = pipelineOutcome(cmds, err)
		finish(seg, call)
		return err
	}
}

// tierFrom is the tier WithTier put in ctx, or "".
func tierFrom(ctx context.Context) string {
	tier, _ := ctx.Value(tierKey{}).(string)
	return tier
}

// callKey marks the context of a traced call, for the calls go-redis makes
// within it.
type callKey struct{}

// beginCall starts the subsegment of a call and returns it with the context
// to run the call in, or nil when the call is not to be traced: its
// context carries no sampled trace, or it is part of a call already traced.
// go-redis runs a new connection's setup (HELLO) through the hooks, with
// the context of the command that dialed it, and a hook added to node
// clients as well (ClusterClient.OnNewNode) would see each node's share of
// a cluster call: neither is a call of its own.
func beginCall(ctx context.Context) (*xray.Segment, context.Context) {
	if !traced(ctx) || ctx.Value(callKey{}) != nil {
		return nil, ctx
	}
	subCtx, seg := xray.BeginSubsegment(ctx, subsegmentName)
	if seg == nil {
		return nil, ctx
	}
	return seg, context.WithValue(subCtx, callKey{}, seg)
}

// pipelineOutcome is the outcome of a pipeline as a whole, and the failure
// to record: "error" when the round trip or any command failed (the first
// failure is recorded), else "denied" when any decision denied, else
// "allowed" when any admitted, else "ok".
func pipelineOutcome(cmds []redis.Cmder, err error) (string, error) {
	if failed(err) {
		return outcomeError, err
	}
	outcome := outcomeOK
	for _, cmd := range cmds {
		switch o := commandOutcome(cmd); o {
		case outcomeError:
			if failed(cmd.Err()) {
				return o, cmd.Err()
			}
			return o, nil
		case outcomeDenied:
			outcome = o
		case outcomeAllowed:
			if outcome != outcomeDenied {
				outcome = o
			}
		}
	}
	return outcome, nil
}

// tracedCall is what the subsegment of a call records.
type tracedCall struct {
	tier     string // "" when the caller set none
	outcome  string
	command  string // EVALSHA, or PIPELINE
	commands int    // a pipeline's length; 0 for one command
	cause    error  // the call's failure, or nil
}

// finish records call on its subsegment and closes it.
func finish(seg *xray.Segment, call tracedCall) {
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

// failed reports whether err is a failure of the call; redis.Nil (a
// missing key) is an answer.
func failed(err error) bool {
	return err != nil && !errors.Is(err, redis.Nil)
}

// isFault tells a fault (X-Ray's 5xx: Redis did not answer, or answered
// that it cannot serve) from an error (X-Ray's 4xx: Redis refused this
// call, as NOSCRIPT, which the Limiter follows with EVAL, or WRONGTYPE;
// or the caller gave up).
func isFault(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		// No answer: a timeout, a refused or broken connection, a closed
		// client or pool.
		return true
	}
	return redis.IsLoadingError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) ||
		redis.IsMaxClientsError(err) || redis.IsOOMError(err) ||
		redis.IsReadOnlyError(err) || redis.IsNoReplicasError(err) ||
		redis.HasErrorPrefix(err, "BUSY")
}
