package edge

import (
	"errors"
	"strings"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Kind is what happened to one request. Every answer derives from it, each
// in one place: the REST authorizer's policy or error and the HTTP API
// authorizer's simple response (internal/authorizer), the middleware's
// status (internal/httplimit), the log level and reason and the metrics'
// outcome (internal/observe).
type Kind uint8

// The kinds of outcome. The zero Kind is none: an Outcome not decided.
const (
	// Allowed: Redis decided, and every limit admitted the request.
	Allowed Kind = iota + 1
	// Denied: Redis decided, and a limit denied the request: 429.
	Denied
	// Degraded: Redis could not decide and the route fails open, so the
	// local fallback limit decided; Result.Allowed says which way (a
	// denial is a 429 like any other).
	Degraded
	// Unauthorized: the request presented an unknown API key or a bearer
	// token that does not verify, and was counted against its source IP's
	// anonymous limit, which admitted it: 401.
	Unauthorized
	// UnauthorizedOverLimit: the same, but the source IP's anonymous limit
	// denied it: 429 with Retry-After. A caller out of budget learns when
	// to come back, whatever it presented.
	UnauthorizedOverLimit
	// Unavailable: the route fails closed and Redis could not decide: 503.
	// The decision's error wraps ratelimit.ErrUnavailable.
	Unavailable
	// Undecidable: the request's limits can never be decided (a
	// configuration pkg/ratelimit refuses): an error, 500.
	Undecidable
	// ShadowDenied: Redis decided, every enforced limit admitted the
	// request, and a shadow limit (RATE_LIMIT_SHADOW) would have denied
	// it: admitted, and reported as such.
	ShadowDenied
	// Blocked: the source address is in a blocked network
	// (RATE_LIMIT_NETWORKS, or a live network block: Result.Control then
	// says so): refused without a decision on Redis, whatever the
	// request presented (REST: a Deny whose context says blocked; HTTP
	// API and API function: 403).
	Blocked
	// Unlimited: the source address is in an unlimited network (or under
	// a live network exemption): admitted without a decision on Redis and
	// without rate-limit headers.
	Unlimited
)

// String is how an outcome of kind k is logged and counted in metrics:
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

// NetworkVerdict is what a caller's source network decides alone
// (RATE_LIMIT_NETWORKS and the live network controls:
// policy.Caller.Verdict): nothing, or the whole answer.
type NetworkVerdict uint8

// The network verdicts.
const (
	// NetworkLimits: the network decides nothing; the caller's limits do
	// (a network's plan, if any, is one of them).
	NetworkLimits NetworkVerdict = iota
	// NetworkBlocked refuses every request of the network, without a
	// Redis call.
	NetworkBlocked
	// NetworkUnlimited admits every request of the network with no limit,
	// without a Redis call; a credential that does not verify is still
	// unauthorized.
	NetworkUnlimited
)

// KindOf is the Kind of a decision: the source network's verdict, the
// decision's result, whether the request presented a credential that
// earned nothing, and the decision's error. It holds the rule "a bad
// credential within the source IP's limit is 401, beyond it 429", and
// every other kind's, and holds them once.
func KindOf(network NetworkVerdict, res ratelimit.Result, unauthorized bool, err error) Kind {
	switch {
	case network == NetworkBlocked:
		return Blocked
	case network == NetworkUnlimited && unauthorized:
		return Unauthorized
	case network == NetworkUnlimited:
		return Unlimited
	case errors.Is(err, ratelimit.ErrUnavailable):
		return Unavailable
	case err != nil:
		return Undecidable
	case unauthorized && (res.Allowed || len(res.Decisions) == 0):
		return Unauthorized
	case unauthorized:
		return UnauthorizedOverLimit
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

// Outcome is the answer to one Request: what happened (Kind), to whom,
// and the rate-limit decision behind it.
type Outcome struct {
	// Kind is what happened; every answer derives from it.
	Kind Kind
	// Caller is who was counted. For an unauthorized request it is the
	// anonymous caller of the source IP, who was charged.
	Caller identity.Caller
	// IdentityHash is Caller.Identity's hash, as logs and principal ids
	// show it: 128 bits of its HMAC-SHA-256 with the identity hash key
	// (plain SHA-256 when no key is configured), hex; IdentityHashUnavailable
	// while a configured key is not read.
	IdentityHash string
	// FailClosed is true when the request's route fails closed.
	FailClosed bool
	// Result is the rate-limit decision over every limit that applies.
	Result ratelimit.Result
	// QuotaDenied is set by app.Resolution.Quota when the quota route's own
	// limit (RATE_LIMIT_QUOTA) denied the call: Result then holds that
	// limit's decision alone, and the answer is 429 even on a route that
	// only reports.
	QuotaDenied bool
	// Plan is the plan whose limits applied, "" for the tier's.
	Plan string
	// Policy, when set, is the RateLimit-Policy value to send with the
	// outcome (see ratelimit.Result.PolicyHeader): every policy that applies, where Result may
	// hold the closest decision only (an Outcome read back from an
	// authorizer's context, FromAuthorizerContext). Empty: the policy of
	// the closest decision.
	Policy string
}

// The names of the live controls that change a decision, as the decision
// log line, the metrics and the authorizer context (CtxControl) give them.
const (
	// ControlBlocked: a block on the caller's identity or its network
	// denied the request.
	ControlBlocked = "blocked-by-control"
	// ControlExempt: an exemption on the caller's identity admitted the
	// request without spending, or one on its network lifted its limits.
	ControlExempt = "exempt"
	// ControlScaled: the caller's limits were scaled.
	ControlScaled = "scaled"
)

// ControlName is the name of the live control c (ControlBlocked,
// ControlExempt, ControlScaled), "" for none.
func ControlName(c controls.Applied) string {
	switch c.Kind {
	case controls.Block:
		return ControlBlocked
	case controls.Exempt:
		return ControlExempt
	case controls.Scale:
		return ControlScaled
	}
	return ""
}

// Control is the name of the live control that changed the outcome's
// decision (ControlName of Result.Control), "" for none: a decision of
// the local fallback knows no controls.
func (o Outcome) Control() string { return ControlName(o.Result.Control) }

// shadowDenied reports whether a shadow limit denied a request of res.
func shadowDenied(res ratelimit.Result) bool {
	for _, d := range res.Decisions {
		if d.Shadow && !d.Allowed {
			return true
		}
	}
	return false
}

// ShadowDenials names the shadow limits that denied the request,
// comma-separated ("" for none).
func (o Outcome) ShadowDenials() string {
	var names []string
	for _, d := range o.Result.Decisions {
		if d.Shadow && !d.Allowed {
			names = append(names, d.Limit.Name)
		}
	}
	return strings.Join(names, ",")
}

// Unauthorized reports whether the request presented an unknown API key or
// a bearer token that does not verify (answered 401 or 429: see Kind).
func (o Outcome) Unauthorized() bool {
	return o.Kind == Unauthorized || o.Kind == UnauthorizedOverLimit
}

// Admitted reports whether the request may reach what it asked for: it
// was decided and every limit that decided it admitted it.
func (o Outcome) Admitted() bool {
	return o.Kind == Allowed || o.Kind == ShadowDenied || o.Kind == Unlimited || (o.Kind == Degraded && o.Result.Allowed)
}

// IdentityHashUnavailable stands for a caller's hashed identity, in logs
// and principal ids, while the identity hash key is configured but not
// read: an unkeyed hash is never written instead.
const IdentityHashUnavailable = "hash-key-unavailable"

// PrincipalID is the authorizer's principalId of an outcome: the tier and
// the hashed identity, e.g. "anonymous:3f1c...", or
// "anonymous:hash-key-unavailable" while the identity hash key is not
// read. It never holds a key, token, user id or IP in clear.
func PrincipalID(o Outcome) string {
	h := o.IdentityHash
	if h == "" {
		h = IdentityHashUnavailable
	}
	return o.Caller.Tier + ":" + h
}
