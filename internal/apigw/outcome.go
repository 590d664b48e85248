package apigw

import (
	"strings"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Kind is what happened to one request (httplimit.Kind, which
// httplimit.KindOf alone decides; its constants follow under the names
// the product has always used). Every answer
// derives from it, each in one place: the REST authorizer's policy or
// error and the HTTP API authorizer's simple response (internal/authorizer),
// the middleware's status (pkg/httplimit), the log level and reason and the
// metrics' outcome (internal/observe).
type Kind = httplimit.Kind

// The kinds of outcome (httplimit's). In the product: Unauthorized means an
// unknown API key or a bearer token that does not verify, counted against
// the source IP's anonymous limit; Unavailable a fail-closed route;
// ShadowDenied a shadow limit of RATE_LIMIT_SHADOW; Blocked and Unlimited a
// network of RATE_LIMIT_NETWORKS or a live network control (Result.Control
// then says so).
const (
	Allowed               = httplimit.Allowed
	Denied                = httplimit.Denied
	Degraded              = httplimit.Degraded
	Unauthorized          = httplimit.Unauthorized
	UnauthorizedOverLimit = httplimit.UnauthorizedOverLimit
	Unavailable           = httplimit.Unavailable
	Undecidable           = httplimit.Undecidable
	ShadowDenied          = httplimit.ShadowDenied
	Blocked               = httplimit.Blocked
	Unlimited             = httplimit.Unlimited
)

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
	// outcome (see httplimit.PolicyHeader): every policy that applies, where Result may
	// hold the closest decision only (an Outcome read back from an
	// authorizer's context, FromAuthorizerContext). Empty: the policy of
	// the closest decision.
	Policy string
}

// HTTPOutcome is the part of o that pkg/httplimit's middleware answers.
func (o Outcome) HTTPOutcome() httplimit.Outcome {
	return httplimit.Outcome{Kind: o.Kind, Result: o.Result, Policy: o.Policy, QuotaDenied: o.QuotaDenied}
}

// The names of the live controls that change a decision, as the decision
// log line, the metrics and the authorizer context (CtxControl) give them:
// package contract's.
const (
	ControlBlocked = contract.ControlBlocked
	ControlExempt  = contract.ControlExempt
	ControlScaled  = contract.ControlScaled
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
