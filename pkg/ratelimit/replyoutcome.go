package ratelimit

import (
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/scriptreply"
)

// The tracing hook classifies the commands it sees with scriptreply.Outcome,
// which asks this package about its own scripts: only this package knows
// their SHA-1s and their reply layout.
func init() { scriptreply.Install(decisionReplyOutcome) }

// decisionReplyOutcome classifies a command that ran without error:
// scriptreply.Allowed or Denied for a decision script's reply (one call's
// verdict over all of its limits), Error when the reply is not a decision;
// ok is false when the command did not run one of this package's scripts.
func decisionReplyOutcome(cmd redis.Cmder) (outcome string, ok bool) {
	if !isDecisionScript(cmd) {
		return "", false
	}
	reply, ok := cmd.(interface{ Val() any })
	if !ok {
		return scriptreply.Error, true
	}
	vals, ok := reply.Val().([]any)
	// { allowed, now_us, then per limit four values, or one for the
	// counters, or per group its reply for the mixed script }: see the
	// scripts' headers and runGroup.
	if !ok || len(vals) < 3 || !decisionScripts()[body(cmd)] && (len(vals) < 6 || (len(vals)-2)%4 != 0) {
		return scriptreply.Error, true
	}
	switch vals[0] {
	case int64(1):
		return scriptreply.Allowed, true
	case int64(0):
		return scriptreply.Denied, true
	default:
		return scriptreply.Error, true
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
// script's reply is not four values per limit: the counters' (one value per
// limit, counters.go) and the mixed script's (one reply per group).
// The scripts are embedded, so the set never changes; it is built on first
// use.
var decisionScripts = sync.OnceValue(func() map[string]bool {
	set := newScriptSet()
	bodies := make(map[string]bool, 2*len(set.all()))
	for _, sc := range set.all() {
		short := sc == &set.slidingWindow || sc == &set.fixedWindow || sc == &set.mixed
		bodies[sc.sha] = short
		bodies[sc.src] = short
	}
	return bodies
})
