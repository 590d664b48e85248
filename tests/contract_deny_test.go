package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/internal/testkit/sfv"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// denyCase is one kind of answer the REST authorizer gives, as API Gateway
// receives it: a Deny's context (values as the JSON literals the
// authorizer returned), or an error's message with no context.
type denyCase struct {
	name string
	// responseType is the gateway response API Gateway answers it with.
	responseType string
	ctx          map[string]any
}

// denyHandler is the REST authorizer in-process on env.
func denyHandler(t *testing.T, env map[string]string) *authorizer.Handler {
	t.Helper()
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] },
		instance.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return authorizer.New(rt)
}

// denyInvoke sends r to h until the answer is not an Allow (at most 20
// times) and returns it as a denyCase: ACCESS_DENIED with the Deny's
// context, UNAUTHORIZED for "Unauthorized", AUTHORIZER_FAILURE for any
// other error.
func denyInvoke(t *testing.T, h *authorizer.Handler, name string, r azRequest) denyCase {
	t.Helper()
	for range 20 {
		out, err := h.Invoke(context.Background(), azRESTEvent(t, r))
		if err != nil {
			if err.Error() == authorizer.ErrUnauthorized.Error() {
				return denyCase{name, "UNAUTHORIZED", map[string]any{}}
			}
			return denyCase{name, "AUTHORIZER_FAILURE", map[string]any{}}
		}
		var resp struct {
			PolicyDocument struct {
				Statement []struct{ Effect string }
			}
			Context map[string]any
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber() // the literal API Gateway reads, not a float's %v
		if err := dec.Decode(&resp); err != nil || len(resp.PolicyDocument.Statement) != 1 {
			t.Fatalf("%s: answer %s: %v", name, out, err)
		}
		if resp.PolicyDocument.Statement[0].Effect == "Deny" {
			return denyCase{name, "ACCESS_DENIED", resp.Context}
		}
	}
	t.Fatalf("%s: still allowed after 20 requests", name)
	return denyCase{}
}

// denyCases are the REST authorizer's answers of every kind that is not an
// Allow: over a limit, a blocked network, a live network block, a live
// block of a caller, an unknown key over the anonymous limit, a denial of
// the local fallback, a fail-closed route Redis could not decide, and an
// unknown key within its limit.
func denyCases(t *testing.T) []denyCase {
	srv := redistest.StartServer(t)
	env := azEnv(srv.URL(), testkit.RandomSecret(t), map[string]string{"RATE_LIMIT_NETWORKS": "198.51.100.0/24=blocked"})
	h := denyHandler(t, env)
	op := controlLimiter(t, srv.Client(t))
	ctx := context.Background()
	if err := op.Controls().SetNetwork(ctx, netip.MustParsePrefix("192.0.2.0/24"),
		controls.Control{Kind: controls.Block, Until: time.Now().Add(10 * time.Minute), Reason: "deny contexts"}); err != nil {
		t.Fatal(err)
	}
	setControl(t, op, "ip:203.0.113.77", controls.Block, 0, 20*time.Minute)

	down := azEnv("redis://127.0.0.1:1", testkit.RandomSecret(t), map[string]string{"RATE_LIMIT_FALLBACK_INSTANCES": "1"})
	hDown := denyHandler(t, down)
	return []denyCase{
		denyInvoke(t, h, "over the anonymous limit", azRequest{ip: "203.0.113.10"}),
		denyInvoke(t, h, "over a route limit", azRequest{method: "POST", path: "/auth/login", ip: "203.0.113.11"}),
		denyInvoke(t, h, "over the org limit", azRequest{ip: "203.0.113.12", headers: map[string]string{"x-api-key": azKey}}),
		denyInvoke(t, h, "blocked network", azRequest{ip: "198.51.100.9"}),
		denyInvoke(t, h, "live network block", azRequest{ip: "192.0.2.9"}),
		denyInvoke(t, h, "live block of a caller", azRequest{ip: "203.0.113.77"}),
		denyInvoke(t, h, "unknown key within the anonymous limit", azRequest{ip: "203.0.113.13", headers: map[string]string{"x-api-key": "not-a-key"}}),
		denyInvoke(t, h, "unknown key over the anonymous limit", azRequest{ip: "203.0.113.13", headers: map[string]string{"x-api-key": "not-a-key"}}),
		denyInvoke(t, hDown, "denial of the local fallback", azRequest{ip: "203.0.113.14"}),
		denyInvoke(t, hDown, "fail-closed route, Redis unreachable", azRequest{method: "POST", path: "/auth/login", ip: "203.0.113.15"}),
	}
}

// denyHeaderShapes are the forms of the headers the gateway responses map
// from the context: integers, and RFC 9651 lists (RateLimit,
// RateLimit-Policy).
var denyInteger = regexp.MustCompile(`^[0-9]+$`)

func denyHeaderProblem(name, value string) string {
	if value == "" {
		return "empty"
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c > 0x7e {
			return fmt.Sprintf("byte %#x", c)
		}
	}
	switch strings.ToLower(name) {
	case "retry-after", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset",
		"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset":
		if !denyInteger.MatchString(value) {
			return "not a non-negative integer"
		}
	case "ratelimit", "ratelimit-policy":
		items, err := sfv.ParseList(value)
		if err != nil {
			return err.Error()
		}
		if len(items) == 0 {
			return "an empty list"
		}
	}
	return ""
}

// denyRenderProblems renders every response of responses (SAM's
// GatewayResponses shape) for c's context, when c is answered by that
// response type or is a Deny (a stricter reading: every response, not
// only ACCESS_DENIED, must render for every Deny's context), and returns
// every header that is not well formed, every body that is not valid
// JSON, and a 429 body whose retry_after_seconds is not its Retry-After.
func denyRenderProblems(template string, responses *yaml.Node, c denyCase) []string {
	var problems []string
	for i := 0; i+1 < len(responses.Content); i += 2 {
		typ, resp := responses.Content[i].Value, responses.Content[i+1]
		if typ != c.responseType && c.responseType != "ACCESS_DENIED" {
			continue
		}
		where := fmt.Sprintf("%s %s, %s", template, typ, c.name)
		headers := map[string]string{}
		hs := yamlGet(yamlGet(resp, "ResponseParameters"), "Headers")
		for j := 0; hs != nil && j+1 < len(hs.Content); j += 2 {
			name, value := hs.Content[j].Value, contractRender(hs.Content[j+1].Value, c.ctx)
			headers[name] = value
			if p := denyHeaderProblem(name, value); p != "" {
				problems = append(problems, fmt.Sprintf("%s: header %s %q: %s", where, name, value, p))
			}
		}
		templates := yamlGet(resp, "ResponseTemplates")
		for j := 0; templates != nil && j+1 < len(templates.Content); j += 2 {
			body := contractRender(yamlScalar(templates.Content[j+1]), c.ctx)
			var v struct {
				Error struct {
					RetryAfterSeconds *json.Number `json:"retry_after_seconds"`
				} `json:"error"`
			}
			dec := json.NewDecoder(strings.NewReader(body))
			dec.UseNumber()
			if !json.Valid([]byte(body)) || dec.Decode(&v) != nil {
				problems = append(problems, fmt.Sprintf("%s: body is not valid JSON: %s", where, body))
				continue
			}
			if ra, ok := headers["Retry-After"]; ok && (v.Error.RetryAfterSeconds == nil || v.Error.RetryAfterSeconds.String() != ra) {
				problems = append(problems, fmt.Sprintf("%s: body's retry_after_seconds %v, Retry-After %q", where, v.Error.RetryAfterSeconds, ra))
			}
		}
	}
	return problems
}

// TestContractEveryDenyRendersWellFormed: every gateway response of both
// templates, rendered for every kind of answer the REST authorizer gives
// (its real answers, from a real Redis or none), has well-formed headers
// and a valid JSON body, and every Deny carries every key any gateway
// response maps (apigw.DenyResponseKeys): AWS documents no rendering of a
// mapped key the authorizer did not return. Before DenyContext, the
// blocked networks' Deny carried no limit keys: 7 of its 10 mapped
// headers rendered empty in each template.
func TestContractEveryDenyRendersWellFormed(t *testing.T) {
	templates := map[string]*yaml.Node{
		"template.yaml":            yamlGet(yamlGet(tplRestAPI(t, tplLoad(t).root).node, "Properties"), "GatewayResponses"),
		"template-authorizer.yaml": tplAuthorizerResponses(t, tplLoadFile(t, tplAuthorizerPath)),
	}
	// Every key a response maps is one every Deny carries.
	for name, responses := range templates {
		for _, ref := range contractCtxRef.FindAllStringSubmatch(denyYAMLText(t, responses), -1) {
			if !slices.Contains(apigw.DenyResponseKeys, ref[1]) {
				t.Errorf("%s maps context.authorizer.%s, which is not in apigw.DenyResponseKeys", name, ref[1])
			}
		}
	}
	cases := denyCases(t)
	kinds := map[string]bool{}
	for _, c := range cases {
		kinds[c.responseType] = true
		if c.responseType == "ACCESS_DENIED" {
			for _, key := range apigw.DenyResponseKeys {
				if _, ok := c.ctx[key]; !ok {
					t.Errorf("%s: the Deny's context has no %s: %v", c.name, key, c.ctx)
				}
			}
		}
		for name, responses := range templates {
			for _, p := range denyRenderProblems(name, responses, c) {
				t.Error(p)
			}
		}
	}
	for _, want := range []string{"ACCESS_DENIED", "UNAUTHORIZED", "AUTHORIZER_FAILURE"} {
		if !kinds[want] {
			t.Errorf("no case is answered %s", want)
		}
	}
	// The blocked network's headers say a quota of 0 until Retry-After.
	for _, c := range cases {
		if c.name == "blocked network" {
			if fmt.Sprint(c.ctx[apigw.CtxLimit]) != "0" || fmt.Sprint(c.ctx[apigw.CtxReset]) != fmt.Sprint(c.ctx[apigw.CtxRetryAfter]) ||
				fmt.Sprint(c.ctx[apigw.CtxPolicy]) != `"blocked";q=0;w=3600` || c.ctx[apigw.CtxTier] != identity.TierAnonymous {
				t.Errorf("blocked network's context: %v", c.ctx)
			}
		}
	}
}

// TestContractDenyRenderingNoticesEmptyValues: the check above fails a
// Deny that lacks a mapped key (the blocked network's context before
// DenyContext).
func TestContractDenyRenderingNoticesEmptyValues(t *testing.T) {
	responses := yamlGet(yamlGet(tplRestAPI(t, tplLoad(t).root).node, "Properties"), "GatewayResponses")
	old := apigw.AuthorizerContext(apigw.Outcome{Kind: apigw.Blocked, Caller: identity.Caller{Tier: identity.TierAnonymous}})
	problems := denyRenderProblems("template.yaml", responses, denyCase{"blocked network, old context", "ACCESS_DENIED", old})
	if len(problems) == 0 {
		t.Fatal("no problem found with a context lacking the limit keys")
	}
	t.Logf("%d problems, e.g. %s", len(problems), problems[0])
}

// denyYAMLText is the text of a YAML node.
func denyYAMLText(t *testing.T, n *yaml.Node) string {
	t.Helper()
	b, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
