package apigw

import (
	"time"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Authorizer context keys: the contract between the authorizer, the API
// function and the templates' gateway responses, the contract package's (contract.CtxTier and
// the others, where each is described), listed in docs/contract.md.
const (
	CtxTier          = contract.CtxTier
	CtxLimit         = contract.CtxLimit
	CtxRemaining     = contract.CtxRemaining
	CtxReset         = contract.CtxReset
	CtxPolicy        = contract.CtxPolicy
	CtxRateLimit     = contract.CtxRateLimit
	CtxName          = contract.CtxName
	CtxWindow        = contract.CtxWindow
	CtxResetAt       = contract.CtxResetAt
	CtxRetryAfter    = contract.CtxRetryAfter
	CtxRetryIn       = contract.CtxRetryIn
	CtxDegraded      = contract.CtxDegraded
	CtxUnavailable   = contract.CtxUnavailable
	CtxBlocked       = contract.CtxBlocked
	CtxUnlimited     = contract.CtxUnlimited
	CtxControl       = contract.CtxControl
	CtxControlUntil  = contract.CtxControlUntil
	CtxControlFactor = contract.CtxControlFactor
)

// BlockedRetryAfter is the wait a REST API's 429 asks of a blocked
// network, whose requests are refused until the configuration changes.
const BlockedRetryAfter = time.Hour

// AuthorizerUnavailableContext is the HTTP API authorizer's context for a
// fail-closed route Redis could not decide: the caller's tier, CtxUnavailable
// and the Retry-After of the 503 (whole seconds, at least 1).
func AuthorizerUnavailableContext(o Outcome, retryAfter time.Duration) map[string]any {
	return map[string]any{
		CtxTier:        o.Caller.Tier,
		CtxUnavailable: true,
		CtxRetryAfter:  httplimit.RetryAfterSeconds(retryAfter),
	}
}

// AuthorizerContext is the authorizer context of an outcome, describing the
// limit closest to denying, and the live control that changed it, if any.
// Values are strings, numbers and booleans only.
//
// A blocked network's retryAfter is BlockedRetryAfter, or, when a live
// network control alone blocks it, the time until that block ends.
func AuthorizerContext(o Outcome) map[string]any {
	ctx := map[string]any{CtxTier: o.Caller.Tier}
	if name := o.Control(); name != "" {
		ctx[CtxControl] = name
		ctx[CtxControlUntil] = unixCeil(o.Result.Control.Until)
		if o.Result.Control.Kind == controls.Scale {
			ctx[CtxControlFactor] = o.Result.Control.Factor
		}
	}
	// refused: the outcome asks the caller to wait, for wait.
	refused, wait := false, time.Duration(0)
	switch {
	case o.Kind == Blocked:
		ctx[CtxBlocked] = true
		refused, wait = true, BlockedRetryAfter
		if o.Result.Control.Kind == controls.Block {
			wait = time.Until(o.Result.Control.Until)
		}
	case o.Kind == Unlimited:
		ctx[CtxUnlimited] = true
	case len(o.Result.Decisions) > 0:
		d := httplimit.Closest(o.Result)
		if !o.Result.Allowed {
			refused, wait = true, o.Result.RetryAfter()
		}
		reset := httplimit.ResetSeconds(d)
		ctx[CtxLimit] = d.Limit.Count
		ctx[CtxRemaining] = d.Remaining
		ctx[CtxReset] = reset
		ctx[CtxPolicy] = httplimit.PolicyHeader(o.Result)
		ctx[CtxRateLimit] = httplimit.RateLimitHeader(d)
		ctx[CtxName] = d.Limit.Name
		ctx[CtxWindow] = httplimit.WindowSeconds(d.Limit)
		ctx[CtxResetAt] = unixCeil(d.At) + reset
		if o.Result.Degraded {
			ctx[CtxDegraded] = true
		}
	}
	if refused {
		retry := httplimit.RetryAfterSeconds(wait)
		ctx[CtxRetryAfter] = retry
		ctx[CtxRetryIn] = contract.RetryPhrase(retry)
	}
	return ctx
}

// DenyResponseKeys are the context keys a REST API's ACCESS_DENIED gateway
// response maps (template.yaml's and template-authorizer.yaml's headers and
// body): every Deny carries each of them (DenyContext).
var DenyResponseKeys = []string{CtxRetryAfter, CtxRetryIn, CtxPolicy, CtxRateLimit, CtxLimit, CtxRemaining, CtxReset, CtxResetAt}

// BlockedPolicyName is the policy name of a blocked network's REST 429
// headers: a quota of 0 over the wait.
const BlockedPolicyName = "blocked"

// DenyContext is the context of a REST authorizer's Deny: AuthorizerContext,
// and every key of DenyResponseKeys the outcome does not describe, so that
// each header the ACCESS_DENIED gateway response maps is well formed and
// its body is valid JSON whatever denied the request. AWS documents no
// value for a mapped context key the authorizer did not return, so none is
// left missing.
//
// A Deny that describes no limit (a blocked network: no limit was asked)
// is described as a quota of 0, named BlockedPolicyName, spent until its
// Retry-After: RateLimit-Limit and RateLimit-Remaining 0, RateLimit-Reset
// the Retry-After, RateLimit-Policy `"blocked";q=0;w=<retryAfter>` and
// RateLimit `"blocked";r=0;t=<retryAfter>`. A Deny without a Retry-After
// of its own (none is built today) gets BlockedRetryAfter's.
func DenyContext(o Outcome) map[string]any {
	ctx := AuthorizerContext(o)
	retry, ok := ctx[CtxRetryAfter].(int64) // as AuthorizerContext writes it
	if !ok || retry < 1 {
		retry = httplimit.RetryAfterSeconds(BlockedRetryAfter)
		ctx[CtxRetryAfter] = retry
	}
	fill := func(key string, v any) {
		if _, present := ctx[key]; !present {
			ctx[key] = v
		}
	}
	zero := ratelimit.Decision{Limit: ratelimit.Limit{Name: BlockedPolicyName, Window: time.Duration(retry) * time.Second},
		RetryAfter: time.Duration(retry) * time.Second}
	fill(CtxRetryIn, contract.RetryPhrase(retry))
	fill(CtxLimit, int64(0))
	fill(CtxRemaining, int64(0))
	fill(CtxReset, retry)
	fill(CtxResetAt, unixCeil(time.Now())+retry)
	fill(CtxPolicy, httplimit.PolicyHeader(ratelimit.Result{Decisions: []ratelimit.Decision{zero}}))
	fill(CtxRateLimit, httplimit.RateLimitHeader(zero))
	return ctx
}

// unixCeil is t in Unix seconds, rounded up (the rule of X-RateLimit-Reset).
func unixCeil(t time.Time) int64 {
	if t.IsZero() {
		t = time.Now()
	}
	u := t.Unix()
	if t.Nanosecond() > 0 {
		u++
	}
	return u
}

// FromAuthorizerContext turns an authorizer context back into the Outcome
// it describes: httplimit.FromAuthorizerContext, the only reader of the
// context keys, with the caller's tier (CtxTier).
func FromAuthorizerContext(ctx map[string]any) (Outcome, bool) {
	o, ok := httplimit.FromAuthorizerContext(ctx)
	if !ok {
		return Outcome{}, false
	}
	tier, _ := ctx[CtxTier].(string)
	return Outcome{Kind: o.Kind, Caller: identity.Caller{Tier: tier}, Result: o.Result, Policy: o.Policy}, true
}
