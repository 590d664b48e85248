//go:build !noxray

package tracing

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// This file is the go-redis hook of both tracers (X-Ray, and OpenTelemetry
// with the build tag otel): which calls are traced, what each records.
// Each tracer supplies beginCall and finish (xrayhook.go, otel.go), on its own
// callSpan: an X-Ray subsegment, or an OpenTelemetry span.

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

// rateLimitVerdict is the method every script command of a
// ratelimit.Limiter has (the package doc's way in for hooks): it knows the
// scripts and the layout of their replies.
type rateLimitVerdict interface {
	RateLimitVerdict() (allowed, ours bool, err error)
}

// commandOutcome classifies a command that has run: a decision script by
// its verdict (rateLimitVerdict), any other command by whether it failed.
// redis.Nil (a missing key) is an answer, not a failure.
func commandOutcome(cmd redis.Cmder) string {
	if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return outcomeError
	}
	v, ok := cmd.(rateLimitVerdict)
	if !ok {
		return outcomeOK
	}
	allowed, ours, err := v.RateLimitVerdict()
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

// pipelineCommand is the command recorded for a pipeline (or a
// transaction) as a whole.
const pipelineCommand = "PIPELINE"

// redisHook is the go-redis hook behind Instrument: one subsegment (span)
// per traced call, nothing at all for an untraced one.
type redisHook struct{}

// callKey marks the context of a traced call, for the calls go-redis makes
// within it (see beginCall).
type callKey struct{}

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
		finish(ctx, seg, call)
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
		finish(ctx, seg, call)
		return err
	}
}

// tierFrom is the tier WithTier put in ctx, or "".
func tierFrom(ctx context.Context) string {
	tier, _ := ctx.Value(tierKey{}).(string)
	return tier
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

// tracedCall is what the subsegment (span) of a call records.
type tracedCall struct {
	tier     string // "" when the caller set none
	outcome  string
	command  string // EVALSHA, or PIPELINE
	commands int    // a pipeline's length; 0 for one command
	cause    error  // the call's failure, or nil
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
