package httplimit

import (
	"context"
	"errors"

	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Kind is what happened to one request; the middleware's answer is a
// switch on it.
type Kind uint8

// The kinds of outcome. The zero Kind is none: an Outcome not decided.
const (
	// Allowed: Redis decided, and every limit admitted the request.
	Allowed Kind = iota + 1
	// Denied: Redis decided, and a limit denied the request: 429.
	Denied
	// Degraded: Redis could not decide and the request fails open, so the
	// local fallback limit decided; Result.Allowed says which way (a
	// denial is a 429 like any other).
	Degraded
	// Unauthorized: the request presented a credential that does not
	// verify, and was counted against its source address's limit, which
	// admitted it: 401.
	Unauthorized
	// UnauthorizedOverLimit: the same, but the source address's limit
	// denied it: 429 with Retry-After. A caller out of budget learns when
	// to come back, whatever it presented.
	UnauthorizedOverLimit
	// Unavailable: the request fails closed and Redis could not decide:
	// 503. The decision's error wraps ratelimit.ErrUnavailable.
	Unavailable
	// Undecidable: the request's limits can never be decided (a
	// configuration pkg/ratelimit refuses): 500.
	Undecidable
	// ShadowDenied: Redis decided, every enforced limit admitted the
	// request, and a shadow limit would have denied it: admitted.
	ShadowDenied
	// Blocked: the source address is blocked: 403, without a decision.
	Blocked
	// Unlimited: the source address is exempt: admitted without a decision
	// and without rate-limit headers.
	Unlimited
)

// String is how an outcome of kind k is logged and counted:
// "allowed", "denied", "degraded", "shadow-denied", "blocked",
// "unlimited", or "rejected" for every kind refused for another reason
// than a limit (an unauthorized credential of either Kind, a request that
// could not be decided: Unavailable, Undecidable) and for the zero Kind.
func (k Kind) String() string {
	switch k {
	case Allowed:
		return "allowed"
	case Denied:
		return "denied"
	case Degraded:
		return "degraded"
	case ShadowDenied:
		return "shadow-denied"
	case Blocked:
		return "blocked"
	case Unlimited:
		return "unlimited"
	default:
		return "rejected"
	}
}

// NetworkVerdict is what a request's source network decides alone,
// before any limit: nothing, or the whole answer.
type NetworkVerdict uint8

// The network verdicts.
const (
	// NetworkLimits: the network decides nothing; the caller's limits do.
	NetworkLimits NetworkVerdict = iota
	// NetworkBlocked refuses every request of the network, without a
	// decision (Kind Blocked).
	NetworkBlocked
	// NetworkUnlimited admits every request of the network with no limit,
	// without a decision (Kind Unlimited); a credential that does not
	// verify is still unauthorized.
	NetworkUnlimited
)

// Decided is everything the Kind of one request's outcome is decided
// from (KindOf).
type Decided struct {
	// Network is what the source network decided alone; NetworkLimits,
	// the zero value, when it decided nothing.
	Network NetworkVerdict
	// Unauthorized is true when the request presented a credential that
	// does not verify (and was counted against its source address).
	Unauthorized bool
	// Result is the rate-limit decision; for a network's verdict, the
	// Result without decisions that stands for it.
	Result ratelimit.Result
	// Err is the decision's error: ratelimit.ErrUnavailable for a request
	// Redis could not decide on a route that fails closed, any other for
	// limits that can never be decided.
	Err error
}

// KindOf is the Kind of an outcome, and the only place one is decided:
// a blocked network refuses whatever the request presented; an error is
// Unavailable or Undecidable; a credential that does not verify is 401
// within the source address's limit (or where no limit applies: an
// unlimited network), 429 beyond it; an unlimited network admits with no
// limit; then the decision: Degraded, ShadowDenied, Allowed or Denied.
func KindOf(d Decided) Kind {
	res := d.Result
	switch {
	case d.Network == NetworkBlocked:
		return Blocked
	case errors.Is(d.Err, ratelimit.ErrUnavailable):
		return Unavailable
	case d.Err != nil:
		return Undecidable
	case d.Unauthorized && (res.Allowed || len(res.Decisions) == 0):
		return Unauthorized
	case d.Unauthorized:
		return UnauthorizedOverLimit
	case d.Network == NetworkUnlimited:
		return Unlimited
	case res.Degraded:
		return Degraded
	case res.Allowed && shadowDenied(res):
		return ShadowDenied
	case res.Allowed:
		return Allowed
	default:
		return Denied
	}
}

// shadowDenied reports whether a shadow limit denied a request of res.
func shadowDenied(res ratelimit.Result) bool {
	for _, d := range res.Decisions {
		if d.Shadow && !d.Allowed {
			return true
		}
	}
	return false
}

// Outcome is what the Middleware answers for one request: what happened
// and the rate-limit decision behind it.
type Outcome struct {
	// Kind is what happened; every answer derives from it.
	Kind Kind
	// Result is the rate-limit decision over every limit that applies.
	Result ratelimit.Result
	// Policy, when set, is the RateLimit-Policy value to send (every
	// policy that applies, where Result may hold the closest decision
	// only); empty: the policy of the closest decision.
	Policy string
	// QuotaDenied marks a denial that is a 429 even under
	// Options.ReportOnly: the limit of the reporting route itself.
	QuotaDenied bool
}

// HTTPOutcome returns o: an Outcome is its own answer (Answerer).
func (o Outcome) HTTPOutcome() Outcome { return o }

// Answerer is what a decide function of Middleware returns: a value of the
// caller's own type, which handlers get back from OutcomeFromContext, and
// whose HTTPOutcome the middleware answers.
type Answerer interface {
	HTTPOutcome() Outcome
}

// Admission is the answer of in-flight limits for one request (see
// Concurrency), taken before its handler runs: the slots it holds while
// it runs, or the limit that is full.
type Admission struct {
	// Denied is true when one of the request's in-flight limits is full:
	// 429 with Retry-After, and the handler is not called. Nothing is held
	// then.
	Denied bool
	// Slot is the denying limit's answer when Denied (Slot.RetryAfter is
	// the wait to suggest); the zero Slot otherwise.
	Slot ratelimit.Slot
	// Release gives back every slot the request holds; nil when it holds
	// none. It is called once, when the handler returns, with a context
	// that outlives the request's.
	Release func(ctx context.Context)
}
