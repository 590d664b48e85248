package apigw

import (
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// TestFromAuthorizerContextReadsAuthorizerContextBack: every outcome an
// authorizer writes into its context (AuthorizerContext,
// AuthorizerUnavailableContext) reads back as the same Kind, typed as an
// HTTP API delivers it or every value a string as a REST API may.
func TestFromAuthorizerContextReadsAuthorizerContextBack(t *testing.T) {
	at := time.Unix(1_767_225_600, 0)
	anon := ratelimit.Limit{Name: identity.TierAnonymous, Count: 30, Window: time.Minute}
	login := ratelimit.Limit{Name: "POST /auth/*", Count: 5, Window: time.Minute}
	caller := identity.Caller{Tier: identity.TierAnonymous}
	allowed := ratelimit.Decision{Limit: anon, Allowed: true, Remaining: 12, ResetAfter: 41 * time.Second, At: at}
	denied := ratelimit.Decision{Limit: login, RetryAfter: 17 * time.Second, ResetAfter: 17 * time.Second, At: at}
	two := ratelimit.Result{Allowed: false, Decisions: []ratelimit.Decision{allowed, denied}}
	degraded := allowed
	degraded.Degraded = true

	for _, tt := range []struct {
		name       string
		ctx        map[string]any
		want       Kind
		decisions  int
		wantPolicy string
	}{
		{"allowed", AuthorizerContext(Outcome{Kind: Allowed, Caller: caller, Result: ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{allowed}}}),
			Allowed, 1, `"anonymous";q=30;w=60`},
		{"denied by one of two limits: the closest, with every policy", AuthorizerContext(Outcome{Kind: Denied, Caller: caller, Result: two}),
			Denied, 1, `"anonymous";q=30;w=60, "POST /auth/*";q=5;w=60`},
		{"degraded", AuthorizerContext(Outcome{Kind: Degraded, Caller: caller, Result: ratelimit.Result{Allowed: true, Degraded: true, Decisions: []ratelimit.Decision{degraded}}}),
			Degraded, 1, `"anonymous";q=30;w=60`},
		{"blocked", AuthorizerContext(Outcome{Kind: Blocked, Caller: caller}), Blocked, 0, ""},
		{"unlimited", AuthorizerContext(Outcome{Kind: Unlimited, Caller: caller, Result: ratelimit.Result{Allowed: true}}), Unlimited, 0, ""},
		{"unavailable", AuthorizerUnavailableContext(Outcome{Kind: Unavailable, Caller: caller}, time.Second), Unavailable, 0, ""},
	} {
		asStrings := make(map[string]any, len(tt.ctx))
		for k, v := range tt.ctx {
			asStrings[k] = fmt.Sprint(v)
		}
		for shape, ctx := range map[string]map[string]any{"typed": tt.ctx, "strings": asStrings} {
			t.Run(tt.name+", "+shape, func(t *testing.T) {
				out, ok := FromAuthorizerContext(ctx)
				if !ok || out.Kind != tt.want || len(out.Result.Decisions) != tt.decisions || out.Policy != tt.wantPolicy || out.Caller.Tier != identity.TierAnonymous {
					t.Fatalf("FromAuthorizerContext(%v) = %+v, %v; want Kind %v with %d decisions and policy %q", ctx, out, ok, tt.want, tt.decisions, tt.wantPolicy)
				}
				if tt.decisions == 1 {
					d := httplimit.Closest(out.Result)
					if d.Limit.Name != tt.ctx[CtxName] || d.Remaining != tt.ctx[CtxRemaining] || d.Allowed != (tt.want != Denied) || out.Result.Allowed != d.Allowed {
						t.Errorf("decision %+v does not match the context %v", d, tt.ctx)
					}
				}
			})
		}
	}
}

// TestFromAuthorizerContextRefuses: a context that describes no outcome,
// or a malformed decision, is not an authorizer's outcome; a policy a
// header could not carry is dropped, the decision kept.
func TestFromAuthorizerContextRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		ctx  map[string]any
	}{
		{"nil", nil},
		{"empty", map[string]any{}},
		{"tier only", map[string]any{CtxTier: "anonymous"}},
		{"limit not a number", map[string]any{CtxTier: "anonymous", CtxLimit: "many", CtxRemaining: 1, CtxReset: 1, CtxWindow: 60}},
		{"negative retryAfter", map[string]any{CtxTier: "anonymous", CtxLimit: 5, CtxRemaining: 0, CtxReset: 1, CtxWindow: 60, CtxRetryAfter: -1}},
		{"flags that are not booleans", map[string]any{CtxTier: "anonymous", CtxBlocked: "maybe", CtxUnavailable: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if out, ok := FromAuthorizerContext(tt.ctx); ok {
				t.Errorf("FromAuthorizerContext(%v) = %+v, want none", tt.ctx, out)
			}
		})
	}
	ctx := map[string]any{CtxTier: "anonymous", CtxLimit: 5, CtxRemaining: 4, CtxReset: 1, CtxWindow: 60, CtxPolicy: "\"a\";q=5;w=60\r\nX-Evil: 1"}
	out, ok := FromAuthorizerContext(ctx)
	if !ok || out.Kind != Allowed || out.Policy != "" {
		t.Errorf("FromAuthorizerContext(%v) = %+v, %v; want allowed without the policy", ctx, out, ok)
	}
}

// TestKindString pins the outcome names logs and metrics carry (and
// template.yaml's alarms filter on).
func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{
		0: "rejected", Allowed: "allowed", Denied: "denied", Degraded: "degraded",
		Unauthorized: "rejected", UnauthorizedOverLimit: "rejected", Unavailable: "rejected", Undecidable: "rejected",
		ShadowDenied: "shadow-denied", Blocked: "blocked", Unlimited: "unlimited",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// TestAuthorizerContextCarriesTheControl: the live control that changed a
// decision reaches the API function through the authorizer's context, typed
// or as strings; a blocked network's wait is its live block's when a live
// block alone blocks it; an unknown control name reads as none.
func TestAuthorizerContextCarriesTheControl(t *testing.T) {
	until := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	anon := ratelimit.Limit{Name: identity.TierAnonymous, Count: 300, Window: time.Minute}
	caller := identity.Caller{Tier: identity.TierAnonymous}
	for _, tt := range []struct {
		name string
		out  Outcome
		want string
	}{
		{"identity block", Outcome{Kind: Denied, Caller: caller, Result: ratelimit.Result{
			Decisions: []ratelimit.Decision{{Limit: anon, RetryAfter: 10 * time.Minute, ResetAfter: 10 * time.Minute, At: time.Now()}},
			Control:   controls.Applied{Kind: controls.Block, Until: until}}}, ControlBlocked},
		{"scale", Outcome{Kind: Allowed, Caller: caller, Result: ratelimit.Result{Allowed: true,
			Decisions: []ratelimit.Decision{{Limit: anon, Allowed: true, Remaining: 299, ResetAfter: time.Second, At: time.Now()}},
			Control:   controls.Applied{Kind: controls.Scale, Until: until, Factor: 10}}}, ControlScaled},
		{"network block", Outcome{Kind: Blocked, Caller: caller, Result: ratelimit.Result{
			Control: controls.Applied{Kind: controls.Block, Until: until}}}, ControlBlocked},
		{"network exemption", Outcome{Kind: Unlimited, Caller: caller, Result: ratelimit.Result{Allowed: true,
			Control: controls.Applied{Kind: controls.Exempt, Until: until}}}, ControlExempt},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := AuthorizerContext(tt.out)
			if ctx[CtxControl] != tt.want || ctx[CtxControlUntil] != until.Unix() {
				t.Fatalf("context %v, want control %s until %d", ctx, tt.want, until.Unix())
			}
			if tt.out.Kind == Blocked {
				if retry := ctx[CtxRetryAfter].(int64); retry < 599 || retry > 600 {
					t.Errorf("a live network block's retryAfter %d, want its end (600 s)", retry)
				}
			}
			strings := make(map[string]any, len(ctx))
			for k, v := range ctx {
				strings[k] = fmt.Sprint(v)
			}
			for _, c := range []map[string]any{ctx, strings} {
				back, ok := FromAuthorizerContext(c)
				if !ok || back.Kind != tt.out.Kind || back.Control() != tt.want || !back.Result.Control.Until.Equal(until) || back.Result.Control.Factor != tt.out.Result.Control.Factor {
					t.Errorf("read back %+v %v, want %s with %s until %v", back, ok, tt.out.Kind, tt.want, until)
				}
			}
		})
	}
	if out, ok := FromAuthorizerContext(map[string]any{CtxTier: "anonymous", CtxBlocked: true, CtxControl: "lifted-by-wishful-thinking"}); !ok || out.Kind != Blocked || out.Control() != "" {
		t.Errorf("an unknown control: %+v %v, want Blocked with no control", out, ok)
	}
	// A static block keeps its hour.
	if ctx := AuthorizerContext(Outcome{Kind: Blocked, Caller: caller}); ctx[CtxRetryAfter] != httplimit.RetryAfterSeconds(BlockedRetryAfter) || ctx[CtxControl] != nil {
		t.Errorf("static block: %v", ctx)
	}
}

// FuzzFromAuthorizerContext: a context as a REST API hands it (every value
// a string) never panics the reader, and a control it reads back is one it
// knows, with a factor within the library's bounds.
func FuzzFromAuthorizerContext(f *testing.F) {
	f.Add("anonymous", "30", "29", "2", "60", "", "scaled", "1796185639", "10")
	f.Add("org", "5", "0", "17", "60", "17", "blocked-by-control", "-1", "NaN")
	f.Add("user", "x", "", "", "", "", "exempt", "99999999999999999999", "1e309")
	f.Fuzz(func(t *testing.T, tier, limit, remaining, reset, window, retry, control, until, factor string) {
		ctx := map[string]any{CtxTier: tier, CtxLimit: limit, CtxRemaining: remaining, CtxReset: reset, CtxWindow: window,
			CtxControl: control, CtxControlUntil: until, CtxControlFactor: factor}
		if retry != "" {
			ctx[CtxRetryAfter] = retry
		}
		out, ok := FromAuthorizerContext(ctx)
		if !ok {
			return
		}
		c := out.Result.Control
		if name := out.Control(); name != "" && name != control {
			t.Fatalf("control %q read as %q", control, name)
		}
		if c.Factor != 0 && (c.Kind != controls.Scale || c.Factor < controls.MinScaleFactor || c.Factor > controls.MaxScaleFactor) {
			t.Fatalf("factor %v of a %s read from %q", c.Factor, c.Kind, factor)
		}
	})
}
