package ratelimit

import (
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Outcomes of one Redis command, as ReplyOutcome names them.
const (
	// ReplyAllowed: a decision script answered that every limit of the call
	// admits the cost (and, unless it was a peek, spent it).
	ReplyAllowed = "allowed"
	// ReplyDenied: a decision script answered that some limit of the call
	// does not admit the cost; nothing was spent.
	ReplyDenied = "denied"
	// ReplyError: the command failed (no reply, or an error reply such as
	// NOSCRIPT), or a decision script's reply is not a decision.
	ReplyError = "error"
	// ReplyOK: any other command that succeeded (SCRIPT LOAD, PING, ...).
	ReplyOK = "ok"
)

// ReplyOutcome classifies a command that has run, for tracing and metrics
// code that sees the commands (a go-redis hook, after next returns) but must
// not know the scripts' reply layout.
//
// A decision script is an EVALSHA or EVAL of one of this package's scripts,
// recognised by its SHA-1 or source, with or without the wrapper the Limiter
// sends it in. Its reply is ReplyAllowed or ReplyDenied for the script call
// as a whole: one call decides all the limits of one identity, and reports a
// denial if any of them denies. A peek (Limiter.Peek) is classified the same
// way, by what it would have done. A decision script that failed, or whose
// reply does not have the scripts' shape (which the Limiter reports as
// ErrUnavailable), is ReplyError.
//
// Any other command is ReplyError when it failed and ReplyOK otherwise;
// redis.Nil (a missing key) is not a failure. ReplyOutcome only reads the
// command; it never sends anything.
func ReplyOutcome(cmd redis.Cmder) string {
	if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return ReplyError
	}
	if !isDecisionScript(cmd) {
		return ReplyOK
	}
	reply, ok := cmd.(interface{ Val() any })
	if !ok {
		return ReplyError
	}
	vals, ok := reply.Val().([]any)
	// { allowed, now_us, then per limit four values, or one for the
	// counters }: see the scripts' headers and runGroup.
	if !ok || len(vals) < 3 || !decisionScripts()[body(cmd)] && (len(vals) < 6 || (len(vals)-2)%4 != 0) {
		return ReplyError
	}
	switch vals[0] {
	case int64(1):
		return ReplyAllowed
	case int64(0):
		return ReplyDenied
	default:
		return ReplyError
	}
}

// isDecisionScript reports whether cmd runs one of this package's scripts.
func isDecisionScript(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	verb, ok := args[0].(string)
	if !ok || !(strings.EqualFold(verb, "evalsha") || strings.EqualFold(verb, "eval")) {
		return false
	}
	_, ours := decisionScripts()[body(cmd)]
	return ours
}

// body is what an EVALSHA or EVAL carries as its first argument: the SHA-1
// or the source.
func body(cmd redis.Cmder) string {
	s, _ := cmd.Args()[1].(string)
	return s
}

// decisionScripts holds the SHA-1 and the source of every script, which is
// what an EVALSHA or an EVAL carries as its first argument, and whether the
// script is a counter, whose reply has one value per limit (counters.go).
// The scripts are embedded, so the set never changes; it is built on first
// use.
var decisionScripts = sync.OnceValue(func() map[string]bool {
	set := newScriptSet()
	bodies := make(map[string]bool, 2*len(set.all()))
	for _, sc := range set.all() {
		counter := sc == &set.slidingWindow || sc == &set.fixedWindow
		bodies[sc.sha] = counter
		bodies[sc.src] = counter
	}
	return bodies
})
