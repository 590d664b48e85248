package tests

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// template-authorizer.yaml is template.yaml without the sample API and with
// what an existing API needs instead. These tests pin down that its gateway
// responses answer what the contract says (as the main template's do), that
// its outputs and permissions are what docs/deploy.md's recipes use, and
// that its copies of template.yaml's parts have not drifted.

const tplAuthorizerPath = "../template-authorizer.yaml"

// tplSampleAPIOnly are the parts of template.yaml the authorizer-only
// template leaves out: the sample API and what only it uses.
var tplSampleAPIOnly = map[string][]string{
	"Parameters": {"StageName", "ThrottleRateLimit", "ThrottleBurstLimit", "ApiIpAddressType", "HttpApiEnabled",
		"RateLimitConcurrency", "RateLimitConcurrencyLease", "ApiAccessLog"},
	"Conditions": {"EnableHttpApi", "HasApiAccessLog"},
	"Resources": {"ApiFunction", "RestApi", "HttpApi", "HttpApiAuthorizer", "HttpApiIntegration", "HttpApiDefaultRoute",
		"HttpApiHealthRoute", "HttpApiQuotaRoute", "HttpApiStage", "HttpApiInvokeApiFunction", "HttpApiInvokeAuthorizer",
		"ConcurrencyDeniedRule", "ApiAccessLogGroup"},
	"Outputs": {"ApiUrl", "HttpApiUrl", "ApiAccessLogGroupName", "VerifyCommand", "HttpApiVerifyCommand"},
}

// tplInFlightEnv are the environment variables of template.yaml's Globals
// that only the API function reads (in-flight limits): the authorizer-only
// template leaves them out.
var tplInFlightEnv = []string{"RATE_LIMIT_CONCURRENCY", "RATE_LIMIT_CONCURRENCY_LEASE"}

// tplAuthorizerOnly are the parts only the authorizer-only template has.
var tplAuthorizerOnly = map[string][]string{
	"Parameters": {"RestApiId", "HttpApiId", "HttpApiDenials"},
	"Conditions": {"HasRestApi", "HasHttpApi"},
	"Resources": {"AuthorizerInvokeFromRestApi", "AuthorizerInvokeFromHttpApi", "DeniedResponse", "UnauthorizedResponse",
		"AuthorizerFailureResponse", "AuthorizerConfigurationErrorResponse"},
	"Outputs": {"AuthorizerFunctionArn", "AuthorizerUri", "InvokePermission", "GatewayResponses"},
}

// TestAuthorizerTemplateGatewayResponses: the REST API gateway responses
// the authorizer-only template creates on RestApiId render, for the
// authorizer's context, exactly what the API function answers for the same
// decision (the comparison TestContractGatewayResponses makes of
// template.yaml's), and exist only when RestApiId is given.
func TestAuthorizerTemplateGatewayResponses(t *testing.T) {
	tpl := tplLoadFile(t, tplAuthorizerPath)
	responses := tplAuthorizerResponses(t, tpl)
	for _, p := range contractResponseProblems(responses) {
		t.Error(p)
	}
	// The same response types as the main template, no more.
	main := yamlGet(yamlGet(tplRestAPI(t, tplLoad(t).root).node, "Properties"), "GatewayResponses")
	if got, want := yamlKeys(responses), yamlKeys(main); !slices.Equal(got, want) {
		t.Errorf("gateway response types %v, template.yaml's RestApi has %v", got, want)
	}
}

// tplAuthorizerResponses is the authorizer-only template's gateway
// responses in SAM's GatewayResponses shape (response type -> StatusCode,
// ResponseParameters.Headers, ResponseTemplates), built from its
// AWS::ApiGateway::GatewayResponse resources, whose shape it checks.
func tplAuthorizerResponses(t *testing.T, tpl tplTemplate) *yaml.Node {
	t.Helper()
	// SAM's GatewayResponses shape, built from the resources.
	responses := &yaml.Node{Kind: yaml.MappingNode}
	for _, r := range tplResources(tpl.root, "AWS::ApiGateway::GatewayResponse") {
		props := yamlGet(r.node, "Properties")
		if c := yamlScalar(yamlGet(r.node, "Condition")); c != "HasRestApi" {
			t.Errorf("%s: Condition %q, want HasRestApi", r.id, c)
		}
		if ref, ok := yamlRef(yamlGet(props, "RestApiId")); !ok || ref != "RestApiId" {
			t.Errorf("%s: RestApiId is not !Ref RestApiId", r.id)
		}
		headers := &yaml.Node{Kind: yaml.MappingNode}
		params := yamlGet(props, "ResponseParameters")
		for i := 0; params != nil && i+1 < len(params.Content); i += 2 {
			name, ok := strings.CutPrefix(params.Content[i].Value, "gatewayresponse.header.")
			if !ok {
				t.Errorf("%s: response parameter %s is not a header", r.id, params.Content[i].Value)
				continue
			}
			headers.Content = append(headers.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, params.Content[i+1])
		}
		shaped := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: "StatusCode"}, yamlGet(props, "StatusCode"),
			{Kind: yaml.ScalarNode, Value: "ResponseParameters"}, {Kind: yaml.MappingNode, Content: []*yaml.Node{
				{Kind: yaml.ScalarNode, Value: "Headers"}, headers}},
			{Kind: yaml.ScalarNode, Value: "ResponseTemplates"}, yamlGet(props, "ResponseTemplates"),
		}}
		responses.Content = append(responses.Content, yamlGet(props, "ResponseType"), shaped)
	}
	return responses
}

// TestAuthorizerTemplateOutputs: what an existing API needs is output (the
// function's ARN, the REST authorizer URI, the permission to create for
// another API), the permissions name the given APIs under API Gateway's
// principal, and the cache, dashboard and security group outputs are
// those of template.yaml.
func TestAuthorizerTemplateOutputs(t *testing.T) {
	tpl := tplLoadFile(t, tplAuthorizerPath)
	if tpl.typed.Transform == nil || tpl.typed.Transform.String == nil || *tpl.typed.Transform.String != "AWS::Serverless-2016-10-31" {
		t.Errorf("Transform: want AWS::Serverless-2016-10-31")
	}
	outputs := yamlGet(tpl.root, "Outputs")
	for _, name := range []string{"AuthorizerFunctionArn", "AuthorizerUri", "InvokePermission", "GatewayResponses",
		"CacheEndpoint", "RedisAuthSecretArn", "DashboardUrl", "FunctionSecurityGroupId"} {
		if _, ok := tpl.typed.Outputs[name]; !ok {
			t.Errorf("Outputs: %s missing", name)
		}
	}
	if v := yamlGet(yamlGet(outputs, "AuthorizerFunctionArn"), "Value"); v == nil || v.Tag != "!GetAtt" || v.Value != "AuthorizerFunction.Arn" {
		t.Errorf("AuthorizerFunctionArn: want !GetAtt AuthorizerFunction.Arn")
	}
	if v := yamlSub(yamlGet(yamlGet(outputs, "AuthorizerUri"), "Value")); v != "arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${AuthorizerFunction.Arn}/invocations" {
		t.Errorf("AuthorizerUri: %q is not the Lambda authorizer URI of the function", v)
	}
	for name, param := range map[string]string{"AuthorizerInvokeFromRestApi": "RestApiId", "AuthorizerInvokeFromHttpApi": "HttpApiId"} {
		res := yamlGet(yamlGet(tpl.root, "Resources"), name)
		props := yamlGet(res, "Properties")
		if yamlScalar(yamlGet(res, "Type")) != "AWS::Lambda::Permission" || yamlScalar(yamlGet(props, "Principal")) != "apigateway.amazonaws.com" ||
			yamlScalar(yamlGet(props, "Action")) != "lambda:InvokeFunction" {
			t.Errorf("%s: want a lambda:InvokeFunction permission for apigateway.amazonaws.com", name)
		}
		if src := yamlSub(yamlGet(props, "SourceArn")); src != "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${"+param+"}/authorizers/*" {
			t.Errorf("%s: SourceArn %q: want the authorizers of ${%s} only", name, src, param)
		}
		if c := yamlScalar(yamlGet(res, "Condition")); c == "" {
			t.Errorf("%s: no Condition: created without an API id", name)
		}
	}
	// The HTTP API default is refuse: an existing integration does not
	// answer a forwarded denial.
	env := yamlGet(yamlGet(yamlGet(yamlGet(yamlGet(tpl.root, "Resources"), "AuthorizerFunction"), "Properties"), "Environment"), "Variables")
	if ref, ok := yamlRef(yamlGet(env, "HTTP_API_DENIALS")); !ok || ref != "HttpApiDenials" {
		t.Errorf("AuthorizerFunction: HTTP_API_DENIALS is not !Ref HttpApiDenials")
	}
	if d := yamlScalar(yamlGet(yamlGet(yamlGet(tpl.root, "Parameters"), "HttpApiDenials"), "Default")); d != "refuse" {
		t.Errorf("HttpApiDenials default %q, want refuse", d)
	}
}

// TestAuthorizerTemplateCopiesMain: SAM has no includes, so the
// authorizer-only template copies template.yaml's parts; every part the
// two share is the same YAML (comments aside), but for the two known
// differences (HTTP_API_DENIALS, and the dashboard without the API
// function's widgets), and every part only one of them has is a known one.
func TestAuthorizerTemplateCopiesMain(t *testing.T) {
	main, az := tplLoad(t).root, tplLoadFile(t, tplAuthorizerPath).root
	for _, section := range []string{"Parameters", "Mappings", "Conditions", "Globals", "Resources", "Outputs"} {
		m, a := yamlGet(main, section), yamlGet(az, section)
		for _, key := range yamlKeys(m) {
			other := yamlGet(a, key)
			if other == nil {
				if !slices.Contains(tplSampleAPIOnly[section], key) {
					t.Errorf("%s.%s of template.yaml is missing from template-authorizer.yaml", section, key)
				}
				continue
			}
			mine := yamlWithoutAPIFunction(yamlGet(m, key))
			switch section + "." + key {
			case "Resources.AuthorizerFunction":
				mine, other = yamlWithout(mine, "Properties", "Environment"), yamlWithout(other, "Properties", "Environment")
			case "Globals.Function":
				// In-flight limits are the API function's alone: the
				// authorizer never learns when a request ends.
				for _, name := range tplInFlightEnv {
					mine = yamlWithout(mine, "Environment", "Variables", name)
				}
			case "Resources.Dashboard":
				// Compared below, widget by widget.
				continue
			}
			if diff := yamlDiff(mine, other, section+"."+key); diff != "" {
				t.Errorf("template-authorizer.yaml's copy differs from template.yaml's: %s", diff)
			}
		}
		for _, key := range yamlKeys(a) {
			if yamlGet(m, key) == nil && !slices.Contains(tplAuthorizerOnly[section], key) {
				t.Errorf("%s.%s of template-authorizer.yaml is neither in template.yaml nor a known addition", section, key)
			}
		}
	}
	// The dashboard: template.yaml's, without the API function's lines.
	body := func(root *yaml.Node) string {
		return yamlSub(yamlGet(yamlGet(yamlGet(yamlGet(root, "Resources"), "Dashboard"), "Properties"), "DashboardBody"))
	}
	var want []string
	for _, line := range strings.Split(body(yamlWithoutAPIFunction(main)), "\n") {
		if strings.Contains(line, `"${ApiFunction}"`) {
			continue
		}
		want = append(want, line)
	}
	want = withoutInFlightWidgets(want)
	got := strings.Split(body(az), "\n")
	// Removing a metric's line leaves a trailing comma on the one before a "]".
	trailingComma := regexp.MustCompile(`\],(\n\s*\])`)
	// Removing the last widget leaves a trailing comma on the one before.
	trailingWidgetComma := regexp.MustCompile(`\}\},(\n\s*\])`)
	norm := func(lines []string) string {
		s := trailingComma.ReplaceAllString(strings.Join(lines, "\n"), "]$1")
		return trailingWidgetComma.ReplaceAllString(s, "}}$1")
	}
	if norm(got) != norm(want) {
		t.Errorf("the dashboard is not template.yaml's without the API function's widgets:\n got %s\nwant %s", norm(got), norm(want))
	}
}

// withoutInFlightWidgets drops from a dashboard body's lines every widget
// about in-flight limits (a widget starts at a line opening with
// {"type":), which only the API function's decisions feed.
func withoutInFlightWidgets(lines []string) []string {
	var out, widget []string
	flush := func() {
		text := strings.Join(widget, "\n")
		if !strings.Contains(text, `"InFlight"`) && !strings.Contains(text, `"ConcurrencyDenials"`) && !strings.Contains(text, "ConcurrencyDeniedRule") {
			out = append(out, widget...)
		}
		widget = nil
	}
	for _, line := range lines {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, `{"type":`) || trimmed == "]" {
			flush()
		}
		widget = append(widget, line)
	}
	flush()
	return out
}

// yamlSub is the text of a !Sub scalar, "" for anything else.
func yamlSub(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!Sub" {
		return ""
	}
	return n.Value
}

// yamlWithoutAPIFunction is a copy of n whose scalars no longer name the
// API function's log group among others (the Contributor Insights rules
// and the dashboard read the authorizer's alone in the authorizer-only
// template).
func yamlWithoutAPIFunction(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Value = strings.ReplaceAll(n.Value, `, "/aws/lambda/${ApiFunction}"`, "")
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, m := range n.Content {
		c.Content[i] = yamlWithoutAPIFunction(m)
	}
	return &c
}

// yamlKeys are a mapping's keys, in order.
func yamlKeys(n *yaml.Node) []string {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	return keys
}

// yamlWithout is a copy of n without the member at the path.
func yamlWithout(n *yaml.Node, path ...string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode || len(path) == 0 {
		return n
	}
	c := *n
	c.Content = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == path[0] {
			if len(path) == 1 {
				continue
			}
			v = yamlWithout(v, path[1:]...)
		}
		c.Content = append(c.Content, k, v)
	}
	return &c
}

// yamlDiff describes the first difference between a and b (kind, tag,
// value, members in order; comments and positions aside), or "".
func yamlDiff(a, b *yaml.Node, at string) string {
	switch {
	case a == nil || b == nil:
		if a != b {
			return at + ": only one has it"
		}
		return ""
	case a.Kind != b.Kind:
		return fmt.Sprintf("%s: kind %d, copy %d", at, a.Kind, b.Kind)
	case a.Kind == yaml.ScalarNode && (a.Value != b.Value || a.ShortTag() != b.ShortTag()):
		return fmt.Sprintf("%s: %s %q, copy %s %q", at, a.ShortTag(), a.Value, b.ShortTag(), b.Value)
	case a.Kind != yaml.ScalarNode && a.Tag != b.Tag && (a.Tag != "!!map" && a.Tag != "!!seq" || b.Tag != "!!map" && b.Tag != "!!seq"):
		return fmt.Sprintf("%s: tag %s, copy %s", at, a.Tag, b.Tag)
	case len(a.Content) != len(b.Content):
		return fmt.Sprintf("%s: %d members, copy %d", at, len(a.Content), len(b.Content))
	}
	for i := range a.Content {
		where := fmt.Sprintf("%s[%d]", at, i)
		if a.Kind == yaml.MappingNode && i%2 == 1 {
			where = at + "." + a.Content[i-1].Value
		}
		if d := yamlDiff(a.Content[i], b.Content[i], where); d != "" {
			return d
		}
	}
	return ""
}
