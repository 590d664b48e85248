package ratelimit

import (
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RateLimitVerdict reads the script command it is called on, once it has
// run, for a go-redis hook (tracing, metrics) that sees the Limiter's
// commands but knows neither its scripts nor the layout of their replies:
// every script command a Limiter sends has this method, which a hook finds
// with a type assertion,
//
//	v, ok := cmd.(interface{ RateLimitVerdict() (allowed, ours bool, err error) })
//
// as go-redis finds NoRetry. It only reads the command; it never sends
// anything. (The package doc says so: it is the way in for hooks, and
// costs the package no exported name.)
//
// ours reports whether cmd is an EVALSHA or EVAL of one of this package's
// decision scripts (recognised by SHA-1 or source, whatever wrapper the
// Limiter sends it in): the rate limits' and the concurrency limits'
// acquire, whose allowed is whether a slot was acquired. For any other
// command, a release of a slot included, ours is false and the other
// results are zero.
//
// For one of ours, err is the command's error, or an error wrapping
// [ErrUnavailable] when its reply is not a decision (the Limiter reports
// such a reply the same way). Otherwise allowed is the verdict of the call
// as a whole: one call decides every limit of one identity, and denies if
// any of them denies. A peek ([Gate.Peek]) reads the same way, by what
// it would have done.
func (c noRetryCmd) RateLimitVerdict() (allowed, ours bool, err error) {
	return decisionReply(c.Cmd)
}

// decisionReply is RateLimitVerdict of cmd.
func decisionReply(cmd redis.Cmder) (allowed, ours bool, err error) {
	if !isDecisionScript(cmd) {
		return false, false, nil
	}
	if err := cmd.Err(); err != nil {
		return false, true, err
	}
	reply, ok := cmd.(interface{ Val() any })
	if !ok {
		return false, true, fmt.Errorf("%w: script reply of type %T", ErrUnavailable, cmd)
	}
	vals, ok := reply.Val().([]any)
	// { allowed, now_us, then per limit four values, or one for the
	// counters, or per group its reply for the mixed script }: see the
	// scripts' headers and runGroup.
	_, short := decisionScript(body(cmd))
	if !ok || len(vals) < 3 || !short && (len(vals) < 6 || (len(vals)-2)%4 != 0) {
		return false, true, fmt.Errorf("%w: script reply is not a decision", ErrUnavailable)
	}
	switch vals[0] {
	case int64(1):
		return true, true, nil
	case int64(0):
		return false, true, nil
	default:
		return false, true, fmt.Errorf("%w: script reply's verdict is %v, want 0 or 1", ErrUnavailable, vals[0])
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
	ours, _ := decisionScript(body(cmd))
	return ours
}

// decisionScript reports whether body (an EVALSHA's SHA-1 or an EVAL's
// source) is one of this package's decision scripts, and whether its reply
// is short (see decisionScripts).
func decisionScript(body string) (ours, short bool) {
	short, ours = decisionScripts()[body]
	return ours, short
}

// body is what an EVALSHA or EVAL carries as its first argument: the SHA-1
// or the source.
func body(cmd redis.Cmder) string {
	s, _ := cmd.Args()[1].(string)
	return s
}

// decisionScripts holds the SHA-1 and the source of every script that
// decides (all but the concurrency release, which only frees a slot), which
// is what an EVALSHA or an EVAL carries as its first argument, and whether
// the script's reply is not four values per limit: the counters' (one value
// per limit, counters.go), the mixed script's (one reply per group), the
// controlled script's (lua/mixed.lua) and the concurrency acquire's (acquired, now, then three values of the limit).
// The scripts are embedded, so the set never changes; it is built on first
// use.
var decisionScripts = sync.OnceValue(func() map[string]bool {
	set := scriptSetFor(true)
	bodies := make(map[string]bool, 2*len(set.all()))
	for _, sc := range set.all() {
		if sc == set.release {
			continue
		}
		// A controlled script's reply may end in the control applied, or
		// be a block's (lua/mixed.lua): its length says nothing.
		short := sc == set.slidingWindow || sc == set.mixed || sc == set.acquire || sc == set.controlled
		bodies[sc.sha()] = short
		bodies[sc.src()] = short
	}
	return bodies
})
