package httplimit

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/slidegate/slidegate/pkg/httplimit/contract"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// FromAuthorizerContext turns the context of slidegate's authorizer back
// into the Outcome it describes, as the context reaches the integration
// behind it (REST: requestContext.authorizer, values often strings; HTTP
// API: requestContext.authorizer.lambda, typed; with
// aws-lambda-go-api-proxy, core.GetAPIGatewayV2ContextFromContext). It is
// the authorizer's context read backwards, and the only reader of the
// context keys (package contract). Numbers may be float64, json.Number, integers or
// strings; booleans may be strings.
//
// The Outcome's Kind is, in this order: Unavailable (contract.CtxUnavailable: a
// fail-closed route the authorizer could not decide; no Result), Blocked
// (contract.CtxBlocked), Unlimited (contract.CtxUnlimited; Result.Allowed, no decisions), or
// the Kind of the closest decision the context describes (Allowed, Denied
// or Degraded), which is then the Result's only decision: it gives
// SetHeaders the headers the authorizer's own decision would,
// and Policy is the context's RateLimit-Policy value (contract.CtxPolicy) when it is
// printable ASCII, which a header can carry. It reports false when the
// context says none of these, or describes a malformed decision: the
// request was not decided by an authorizer.
func FromAuthorizerContext(ctx map[string]any) (Outcome, bool) {
	if len(ctx) == 0 {
		return Outcome{}, false
	}
	var out Outcome
	control := controlFromContext(ctx)
	switch {
	case ctxTrue(ctx, contract.CtxUnavailable):
		out.Kind = KindOf(Decided{Err: ErrAuthorizerUnavailable})
		return out, true
	case ctxTrue(ctx, contract.CtxBlocked):
		out.Result.Control = control
		out.Kind = KindOf(Decided{Network: NetworkBlocked, Result: out.Result})
		return out, true
	case ctxTrue(ctx, contract.CtxUnlimited):
		out.Result = ratelimit.Result{Allowed: true, Control: control}
		out.Kind = KindOf(Decided{Network: NetworkUnlimited, Result: out.Result})
		return out, true
	}
	d, ok := decisionFromContext(ctx)
	if !ok {
		return Outcome{}, false
	}
	out.Result = ratelimit.Result{Allowed: d.Allowed, Degraded: d.Degraded, Decisions: []ratelimit.Decision{d}, Control: control}
	out.Kind = KindOf(Decided{Result: out.Result})
	out.Policy = policyFromContext(ctx)
	return out, true
}

// controlFromContext is the live control an authorizer context names
// (contract.CtxControl), the zero controls.Applied when it names none it knows. Its
// end is contract.CtxControlUntil's, its factor contract.CtxControlFactor's (a scale's,
// within the library's bounds, or none).
func controlFromContext(ctx map[string]any) controls.Applied {
	name, _ := ctxString(ctx, contract.CtxControl)
	var c controls.Applied
	switch name {
	case contract.ControlBlocked:
		c.Kind = controls.Block
	case contract.ControlExempt:
		c.Kind = controls.Exempt
	case contract.ControlScaled:
		c.Kind = controls.Scale
	default:
		return controls.Applied{}
	}
	if until, ok := ctxInt(ctx, contract.CtxControlUntil); ok && until > 0 && until < 1<<40 {
		c.Until = time.Unix(until, 0)
	}
	if c.Kind == controls.Scale {
		if f, ok := ctxFloat(ctx, contract.CtxControlFactor); ok && f >= controls.MinScaleFactor && f <= controls.MaxScaleFactor {
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
// carries (contract.CtxPolicy), "" when none or when it is not a printable ASCII
// string, which a header could not carry.
func policyFromContext(ctx map[string]any) string {
	s, _ := ctxString(ctx, contract.CtxPolicy)
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
	limit, ok1 := ctxInt(ctx, contract.CtxLimit)
	remaining, ok2 := ctxInt(ctx, contract.CtxRemaining)
	reset, ok3 := ctxInt(ctx, contract.CtxReset)
	window, ok4 := ctxInt(ctx, contract.CtxWindow)
	if !ok1 || !ok2 || !ok3 || !ok4 || limit < 1 || limit > ratelimit.MaxCount || remaining < 0 || reset < 0 || window < 1 || window > int64(ratelimit.MaxWindow/time.Second) {
		return ratelimit.Decision{}, false
	}
	name, _ := ctxString(ctx, contract.CtxName)
	if name == "" {
		name, _ = ctxString(ctx, contract.CtxTier)
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
	if v, present := ctx[contract.CtxRetryAfter]; present && v != nil {
		retry, ok := ctxInt(ctx, contract.CtxRetryAfter)
		if !ok || retry < 0 {
			return ratelimit.Decision{}, false
		}
		d.Allowed = false
		d.RetryAfter = time.Duration(max(retry, 1)) * time.Second
	}
	if resetAt, ok := ctxInt(ctx, contract.CtxResetAt); ok && resetAt >= reset {
		d.At = time.Unix(resetAt-reset, 0)
	} else {
		d.At = time.Now().Truncate(time.Second)
	}
	if b, ok := ctxBool(ctx, contract.CtxDegraded); ok {
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
