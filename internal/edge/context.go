package edge

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/httplimit/wire"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Authorizer context keys: the contract between the authorizer, the API
// function and template.yaml's gateway responses
// ($context.authorizer.<key>), listed with their types in docs/contract.md
// ("Context keys").
const (
	CtxTier       = "tier"       // caller's tier
	CtxLimit      = "limit"      // count of the closest limit
	CtxRemaining  = "remaining"  // units left in it
	CtxReset      = "reset"      // seconds until reset (RateLimit-Reset; for a denial, = retryAfter)
	CtxPolicy     = "policy"     // RateLimit-Policy value
	CtxRateLimit  = "rateLimit"  // RateLimit value, e.g. "anonymous";r=12;t=41 (gateway responses cannot compute it)
	CtxName       = "name"       // policy name of the closest limit
	CtxWindow     = "window"     // its window, seconds
	CtxResetAt    = "resetAt"    // Unix seconds of the reset (X-RateLimit-Reset)
	CtxRetryAfter = "retryAfter" // whole seconds, >= 1, only when denied
	CtxRetryIn    = "retryIn"    // the wait in words ("18 seconds", "1 second"), only when denied
	CtxDegraded   = "degraded"   // true, only when decided by the local fallback
	// CtxUnavailable is true only in an HTTP API authorizer's answer for a
	// fail-closed route Redis could not decide. An HTTP API answers an
	// authorizer error with a bare 500, so the authorizer authorizes the
	// request with this flag (and tier and retryAfter only: there is no
	// decision) and the API function answers docs/contract.md's 503 with
	// Retry-After and code SERVICE_UNAVAILABLE without asking Redis again
	// (its Retry-After is the function's own UnavailableRetryAfter, 1 s by
	// default like the authorizer's and template.yaml's). The REST
	// authorizer never sets it: it returns an error, which template.yaml's
	// AUTHORIZER_FAILURE response maps to the same 503.
	CtxUnavailable = "unavailable"
	// CtxBlocked is true when the source address is in a blocked network
	// (RATE_LIMIT_NETWORKS): a REST authorizer answers Deny with it, and
	// no limit was asked. A REST API answers every Deny with the one
	// status of its ACCESS_DENIED gateway response (429), so the context
	// also carries CtxRetryAfter, BlockedRetryAfter, for its body.
	CtxBlocked = "blocked"
	// CtxUnlimited is true when the source address is in an unlimited
	// network: the request was admitted without a limit.
	CtxUnlimited = "unlimited"
	// CtxControl names the live control that changed the decision
	// (ControlBlocked, ControlExempt or ControlScaled), only when one did;
	// CtxControlUntil is when it ends (Unix seconds, rounded up) and
	// CtxControlFactor a scale's factor.
	CtxControl       = "control"
	CtxControlUntil  = "controlUntil"
	CtxControlFactor = "controlFactor"
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
		CtxRetryAfter:  ratelimit.RetryAfterSeconds(retryAfter),
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
	switch {
	case o.Kind == Blocked:
		retry := ratelimit.RetryAfterSeconds(BlockedRetryAfter)
		if o.Result.Control.Kind == controls.Block {
			retry = ratelimit.RetryAfterSeconds(time.Until(o.Result.Control.Until))
		}
		ctx[CtxBlocked] = true
		ctx[CtxRetryAfter] = retry
		ctx[CtxRetryIn] = wire.RetryPhrase(retry)
		return ctx
	case o.Kind == Unlimited:
		ctx[CtxUnlimited] = true
		return ctx
	}
	if len(o.Result.Decisions) == 0 {
		return ctx
	}
	d := o.Result.Closest()
	reset := d.ResetSeconds()
	ctx[CtxLimit] = d.Limit.Count
	ctx[CtxRemaining] = d.Remaining
	ctx[CtxReset] = reset
	ctx[CtxPolicy] = o.Result.PolicyHeader()
	ctx[CtxRateLimit] = d.RateLimitHeader()
	ctx[CtxName] = d.Limit.Name
	ctx[CtxWindow] = d.Limit.WindowSeconds()
	ctx[CtxResetAt] = unixCeil(d.At) + reset
	if !o.Result.Allowed {
		retry := ratelimit.RetryAfterSeconds(o.Result.RetryAfter())
		ctx[CtxRetryAfter] = retry
		ctx[CtxRetryIn] = wire.RetryPhrase(retry)
	}
	if o.Result.Degraded {
		ctx[CtxDegraded] = true
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
	retry, ok := ctxInt(ctx, CtxRetryAfter)
	if !ok || retry < 1 {
		retry = ratelimit.RetryAfterSeconds(BlockedRetryAfter)
		ctx[CtxRetryAfter] = retry
	}
	fill := func(key string, v any) {
		if _, present := ctx[key]; !present {
			ctx[key] = v
		}
	}
	zero := ratelimit.Decision{Limit: ratelimit.Limit{Name: BlockedPolicyName, Window: time.Duration(retry) * time.Second},
		RetryAfter: time.Duration(retry) * time.Second}
	fill(CtxRetryIn, wire.RetryPhrase(retry))
	fill(CtxLimit, int64(0))
	fill(CtxRemaining, int64(0))
	fill(CtxReset, retry)
	fill(CtxResetAt, unixCeil(time.Now())+retry)
	fill(CtxPolicy, ratelimit.Result{Decisions: []ratelimit.Decision{zero}}.PolicyHeader())
	fill(CtxRateLimit, zero.RateLimitHeader())
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
// it describes, as the context reaches the API function (REST:
// requestContext.authorizer, values often strings; HTTP API:
// requestContext.authorizer.lambda, typed). It is AuthorizerContext and
// AuthorizerUnavailableContext read backwards, and the only reader of
// the context keys. Numbers may be float64, json.Number, integers or
// strings; booleans may be strings.
//
// The Outcome's Kind is, in this order: Unavailable (CtxUnavailable: a
// fail-closed route the authorizer could not decide; no Result), Blocked
// (CtxBlocked), Unlimited (CtxUnlimited; Result.Allowed, no decisions), or
// the Kind of the closest decision the context describes (Allowed, Denied
// or Degraded), which is then the Result's only decision: it gives
// ratelimit.SetHeaders the headers the authorizer's own decision would,
// and Policy is the context's RateLimit-Policy value (CtxPolicy) when it is
// printable ASCII, which a header can carry. It reports false when the
// context says none of these, or describes a malformed decision: the
// request was not decided by an authorizer.
func FromAuthorizerContext(ctx map[string]any) (Outcome, bool) {
	if len(ctx) == 0 {
		return Outcome{}, false
	}
	tier, _ := ctxString(ctx, CtxTier)
	out := Outcome{Caller: identity.Caller{Tier: tier}}
	control := controlFromContext(ctx)
	switch {
	case ctxTrue(ctx, CtxUnavailable):
		out.Kind = Unavailable
		return out, true
	case ctxTrue(ctx, CtxBlocked):
		out.Kind, out.Result.Control = Blocked, control
		return out, true
	case ctxTrue(ctx, CtxUnlimited):
		out.Kind, out.Result = Unlimited, ratelimit.Result{Allowed: true, Control: control}
		return out, true
	}
	d, ok := decisionFromContext(ctx)
	if !ok {
		return Outcome{}, false
	}
	out.Result = ratelimit.Result{Allowed: d.Allowed, Degraded: d.Degraded, Decisions: []ratelimit.Decision{d}, Control: control}
	out.Kind = httplimit.KindOf(out.Result, false, nil)
	out.Policy = policyFromContext(ctx)
	return out, true
}

// controlFromContext is the live control an authorizer context names
// (CtxControl), the zero controls.Applied when it names none it knows. Its
// end is CtxControlUntil's, its factor CtxControlFactor's (a scale's,
// within the library's bounds, or none).
func controlFromContext(ctx map[string]any) controls.Applied {
	name, _ := ctxString(ctx, CtxControl)
	var c controls.Applied
	switch name {
	case ControlBlocked:
		c.Kind = controls.Block
	case ControlExempt:
		c.Kind = controls.Exempt
	case ControlScaled:
		c.Kind = controls.Scale
	default:
		return controls.Applied{}
	}
	if until, ok := ctxInt(ctx, CtxControlUntil); ok && until > 0 && until < 1<<40 {
		c.Until = time.Unix(until, 0)
	}
	if c.Kind == controls.Scale {
		if f, ok := ctxFloat(ctx, CtxControlFactor); ok && f >= controls.MinScaleFactor && f <= controls.MaxScaleFactor {
			c.Factor = f
		}
	}
	return c
}

// ctxFloat reads a number that may have a fraction.
func ctxFloat(ctx map[string]any, key string) (float64, bool) {
	switch v := ctx[key].(type) {
	case float64:
		return v, !math.IsNaN(v) && !math.IsInf(v, 0)
	case json.Number:
		f, err := v.Float64()
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	if n, ok := ctxInt(ctx, key); ok {
		return float64(n), true
	}
	return 0, false
}

// policyFromContext is the RateLimit-Policy value an authorizer context
// carries (CtxPolicy), "" when none or when it is not a printable ASCII
// string, which a header could not carry.
func policyFromContext(ctx map[string]any) string {
	s, _ := ctxString(ctx, CtxPolicy)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return ""
		}
	}
	return s
}

// decisionFromContext rebuilds the closest decision from an authorizer
// context. It reports false when the context carries no decision or a
// malformed one.
func decisionFromContext(ctx map[string]any) (ratelimit.Decision, bool) {
	limit, ok1 := ctxInt(ctx, CtxLimit)
	remaining, ok2 := ctxInt(ctx, CtxRemaining)
	reset, ok3 := ctxInt(ctx, CtxReset)
	window, ok4 := ctxInt(ctx, CtxWindow)
	if !ok1 || !ok2 || !ok3 || !ok4 || limit < 1 || limit > ratelimit.MaxCount || remaining < 0 || reset < 0 || window < 1 || window > int64(ratelimit.MaxWindow/time.Second) {
		return ratelimit.Decision{}, false
	}
	name, _ := ctxString(ctx, CtxName)
	if name == "" {
		name, _ = ctxString(ctx, CtxTier)
	}
	if name == "" {
		return ratelimit.Decision{}, false
	}
	d := ratelimit.Decision{
		Limit:      ratelimit.Limit{Name: name, Count: limit, Window: time.Duration(window) * time.Second},
		Allowed:    true,
		Remaining:  remaining,
		ResetAfter: time.Duration(reset) * time.Second,
	}
	if v, present := ctx[CtxRetryAfter]; present && v != nil {
		retry, ok := ctxInt(ctx, CtxRetryAfter)
		if !ok || retry < 0 {
			return ratelimit.Decision{}, false
		}
		d.Allowed = false
		d.RetryAfter = time.Duration(max(retry, 1)) * time.Second
	}
	if resetAt, ok := ctxInt(ctx, CtxResetAt); ok && resetAt >= reset {
		d.At = time.Unix(resetAt-reset, 0)
	} else {
		d.At = time.Now().Truncate(time.Second)
	}
	if b, ok := ctxBool(ctx, CtxDegraded); ok {
		d.Degraded = b
	}
	return d, true
}

func ctxInt(ctx map[string]any, key string) (int64, bool) {
	switch v := ctx[key].(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, false
		}
		return int64(v), true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func ctxString(ctx map[string]any, key string) (string, bool) {
	s, ok := ctx[key].(string)
	return s, ok
}

// ctxTrue reports whether the context's key holds true, as a boolean or a
// string.
func ctxTrue(ctx map[string]any, key string) bool {
	b, ok := ctxBool(ctx, key)
	return ok && b
}

func ctxBool(ctx map[string]any, key string) (bool, bool) {
	switch v := ctx[key].(type) {
	case bool:
		return v, true
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		return b, err == nil
	}
	return false, false
}
