// Package scriptreply names what a Redis command answered in the terms of
// pkg/ratelimit's decision scripts, for code that sees the commands run (the
// tracing package's go-redis hook, after next returns) but must know neither
// the scripts nor the layout of their replies.
//
// It is this product's, not the library's: X-Ray annotates every Redis call
// with an outcome (docs/observability.md). pkg/ratelimit, which owns
// the scripts and their reply layout, installs the classifier when it is
// initialised, so Outcome knows the scripts in every program that imports
// pkg/ratelimit, which is every program that can send them.
package scriptreply

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

// Outcomes of one Redis command, as Outcome names them.
const (
	// Allowed: a decision script answered that every limit of the call
	// admits the cost (and, unless it was a peek, spent it).
	Allowed = "allowed"
	// Denied: a decision script answered that some limit of the call does
	// not admit the cost; nothing was spent.
	Denied = "denied"
	// Error: the command failed (no reply, or an error reply such as
	// NOSCRIPT), or a decision script's reply is not a decision.
	Error = "error"
	// OK: any other command that succeeded (SCRIPT LOAD, PING, ...).
	OK = "ok"
)

// decisionOutcome is the classifier pkg/ratelimit installs: Allowed, Denied
// or Error for a command that ran one of its scripts, ok false for any
// other command. Written once, by that package's initialisation, before any
// command can run; nil in a program without pkg/ratelimit.
var decisionOutcome func(cmd redis.Cmder) (outcome string, ok bool)

// Install sets the classifier of decision-script commands. pkg/ratelimit
// calls it from its init function; nothing else may.
func Install(classify func(cmd redis.Cmder) (outcome string, ok bool)) {
	decisionOutcome = classify
}

// Outcome classifies a command that has run.
//
// A decision script is an EVALSHA or EVAL of one of pkg/ratelimit's
// scripts, recognised by its SHA-1 or source, with or without the wrapper
// the Limiter sends it in. Its reply is Allowed or Denied for the script
// call as a whole: one call decides all the limits of one identity, and
// reports a denial if any of them denies. A peek (Limiter.Peek) is
// classified the same way, by what it would have done. A decision script
// that failed, or whose reply does not have the scripts' shape (which the
// Limiter reports as ErrUnavailable), is Error.
//
// Any other command is Error when it failed and OK otherwise; redis.Nil (a
// missing key) is not a failure. Outcome only reads the command; it never
// sends anything.
func Outcome(cmd redis.Cmder) string {
	if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return Error
	}
	if decisionOutcome != nil {
		if outcome, ok := decisionOutcome(cmd); ok {
			return outcome
		}
	}
	return OK
}
