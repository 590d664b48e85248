package tests

import (
	"bytes"
	"github.com/slidegate/slidegate/internal/config"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"gopkg.in/yaml.v3"

	"github.com/slidegate/slidegate/internal/deployconfig"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// The template tests pin down what template.yaml must never lose: they read
// it with goformation (the typed model of CloudFormation and SAM) and, where
// goformation's model cannot hold a part (it types SAM's GatewayResponses as
// plain strings, and resolves references away), walk the YAML itself.

const tplPath = "../template.yaml"

// tplFunctionIDs are the template's two functions; `sam build` builds each
// with `make build-<LogicalId>`.
var tplFunctionIDs = []string{"AuthorizerFunction", "ApiFunction"}

// tplSpecStageVars are the stage variables of docs/contract.md's configuration
// table; the test adds any other rateLimit* name the code reads.
var tplSpecStageVars = []string{"rateLimitAnonymous", "rateLimitUser", "rateLimitOrg", "rateLimitAlgorithm"}

// tplTemplate is template.yaml read both ways.
type tplTemplate struct {
	// typed is goformation's model of the template without the parts its
	// model refuses (the REST API's GatewayResponses).
	typed *cloudformation.Template
	// root is the template's top-level YAML mapping, unresolved.
	root *yaml.Node
}

func tplLoad(t *testing.T) tplTemplate {
	t.Helper()
	return tplLoadFile(t, tplPath)
}

// tplLoadFile is tplLoad of another template file (template-authorizer.yaml).
func tplLoadFile(t *testing.T, path string) tplTemplate {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read template: %v", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parse template YAML: %v", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("template: want one YAML mapping document")
	}
	root := doc.Content[0]

	// goformation types AWS::Serverless::Api GatewayResponses as
	// map[string]string, which no real gateway response fits, and does not
	// know SAM's ApiKeySourceType nor the APIs' IpAddressType (REST: in
	// EndpointConfiguration; HTTP API: a property of its own): parse a copy
	// without them, and check them on the YAML nodes below.
	var stripped yaml.Node
	if err := yaml.Unmarshal(raw, &stripped); err != nil {
		t.Fatalf("parse template YAML: %v", err)
	}
	for _, res := range tplResources(stripped.Content[0], "AWS::Serverless::Api") {
		yamlDelete(yamlGet(res.node, "Properties"), "GatewayResponses")
		yamlDelete(yamlGet(res.node, "Properties"), "ApiKeySourceType")
		yamlDelete(yamlGet(yamlGet(res.node, "Properties"), "EndpointConfiguration"), "IpAddressType")
	}
	for _, res := range tplResources(stripped.Content[0], "AWS::ApiGatewayV2::Api") {
		yamlDelete(yamlGet(res.node, "Properties"), "IpAddressType")
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(&stripped); err != nil {
		t.Fatalf("re-encode template: %v", err)
	}
	typed, err := goformation.ParseYAML(buf.Bytes())
	if err != nil {
		t.Fatalf("goformation: parse template: %v", err)
	}
	return tplTemplate{typed: typed, root: root}
}

func TestTemplateIsSAM(t *testing.T) {
	tpl := tplLoad(t)
	if tpl.typed.Transform == nil || tpl.typed.Transform.String == nil || *tpl.typed.Transform.String != "AWS::Serverless-2016-10-31" {
		t.Errorf("Transform: want AWS::Serverless-2016-10-31")
	}
	for _, name := range []string{"ApiUrl", "CacheEndpoint"} {
		if _, ok := tpl.typed.Outputs[name]; !ok {
			t.Errorf("Outputs: %s missing", name)
		}
	}
}

// TestTemplateFunctions: both functions run the Makefile-built bootstrap on
// provided.al2023/arm64 with active tracing, inside the VPC.
func TestTemplateFunctions(t *testing.T) {
	tpl := tplLoad(t)
	global, _ := tpl.typed.GetServerlessGlobalFunction()
	targets := tplMakeTargets(t)
	for _, id := range tplFunctionIDs {
		t.Run(id, func(t *testing.T) {
			fn, err := tpl.typed.GetServerlessFunctionWithName(id)
			if err != nil {
				t.Fatalf("%v", err)
			}
			runtime, arch, handler, tracing := tplDeref(fn.Runtime), fn.Architectures, tplDeref(fn.Handler), tplDeref(fn.Tracing)
			if global != nil {
				runtime = tplFirst(runtime, tplDeref(global.Runtime))
				handler = tplFirst(handler, tplDeref(global.Handler))
				tracing = tplFirst(tracing, tplDeref(global.Tracing))
				if len(arch) == 0 && global.Architectures != nil {
					arch = *global.Architectures
				}
			}
			checks := []struct{ what, got, want string }{
				{"Runtime", runtime, "provided.al2023"},
				{"Architectures", strings.Join(arch, ","), "arm64"},
				{"Handler", handler, "bootstrap"},
				{"Tracing", tracing, "Active"},
				{"Metadata.BuildMethod", tplMetadata(fn.AWSCloudFormationMetadata, "BuildMethod"), "makefile"},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s: got %q, want %q", c.what, c.got, c.want)
				}
			}
			if !targets["build-"+id] {
				t.Errorf("no Makefile target build-%s (sam build runs it for BuildMethod makefile); targets: %v", id, tplSortedKeys(targets))
			}
			if sgs := tplFunctionSGs(t, tpl.root, id); len(sgs) == 0 {
				t.Errorf("VpcConfig: no security group (the functions must run in the cache's VPC)")
			}
		})
	}
}

// TestTemplateAuthorizer: the REST API's default authorizer is the REQUEST
// authorizer function with result caching off and only identity sources
// that every request has.
func TestTemplateAuthorizer(t *testing.T) {
	tpl := tplLoad(t)
	api := tplRestAPI(t, tpl.root)
	auth := yamlGet(yamlGet(api.node, "Properties"), "Auth")
	if auth == nil {
		t.Fatalf("RestApi: no Auth")
	}
	name := yamlScalar(yamlGet(auth, "DefaultAuthorizer"))
	authorizer := yamlGet(yamlGet(auth, "Authorizers"), name)
	if authorizer == nil {
		t.Fatalf("RestApi: DefaultAuthorizer %q is not among Authorizers", name)
	}
	if got := yamlScalar(yamlGet(authorizer, "FunctionPayloadType")); got != "REQUEST" {
		t.Errorf("FunctionPayloadType: got %q, want REQUEST", got)
	}
	if target, _ := yamlRef(yamlGet(authorizer, "FunctionArn")); target != "AuthorizerFunction" {
		t.Errorf("FunctionArn: refers to %q, want AuthorizerFunction", target)
	}
	identity := yamlGet(authorizer, "Identity")
	if identity == nil {
		t.Fatalf("authorizer %s: no Identity (SAM's default caches for 300 s)", name)
	}
	every := yamlGet(identity, "ReauthorizeEvery")
	if every == nil || every.Value != "0" {
		t.Errorf("ReauthorizeEvery: got %v, want 0 (a cached Allow lets requests through uncounted)", yamlString(every))
	}
	// A missing identity source is a 401 before the authorizer runs: no
	// header or query string (which a caller may leave out) may be one.
	for _, optional := range []string{"Headers", "QueryStrings"} {
		if n := yamlGet(identity, optional); n != nil && len(n.Content) > 0 {
			t.Errorf("Identity.%s: %s; only sources every request has (context, stage variables) may be listed", optional, yamlString(n))
		}
	}
	// Usage plans must meter the key the authorizer returns
	// (usageIdentifierKey), not the raw header.
	if got := yamlScalar(yamlGet(yamlGet(api.node, "Properties"), "ApiKeySourceType")); got != "AUTHORIZER" {
		t.Errorf("ApiKeySourceType: got %q, want AUTHORIZER (usage plans would ignore usageIdentifierKey)", got)
	}
	// The typed model sees the same default authorizer.
	typedAPI, err := tpl.typed.GetServerlessApiWithName(api.id)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if typedAPI.Auth == nil || tplDeref(typedAPI.Auth.DefaultAuthorizer) != name {
		t.Errorf("goformation: RestApi default authorizer is not %q", name)
	}
}

// TestTemplateGatewayResponses: a Deny is a 429 with the rate-limit headers
// from the authorizer's context and the contract's body; an authorizer error is a
// 503 with Retry-After and the SERVICE_UNAVAILABLE body.
func TestTemplateGatewayResponses(t *testing.T) {
	tpl := tplLoad(t)
	responses := yamlGet(yamlGet(tplRestAPI(t, tpl.root).node, "Properties"), "GatewayResponses")
	if responses == nil {
		t.Fatalf("RestApi: no GatewayResponses")
	}
	cases := []struct {
		responseType string
		status       string
		headers      map[string]*regexp.Regexp
		bodyCode     string
	}{
		{
			responseType: "ACCESS_DENIED",
			status:       "429",
			headers: map[string]*regexp.Regexp{
				"Retry-After":         regexp.MustCompile(`^context\.authorizer\.retryAfter$`),
				"RateLimit-Policy":    regexp.MustCompile(`^context\.authorizer\.\w+$`),
				"RateLimit":           regexp.MustCompile(`^context\.authorizer\.\w+$`),
				"RateLimit-Limit":     regexp.MustCompile(`^context\.authorizer\.limit$`),
				"RateLimit-Remaining": regexp.MustCompile(`^context\.authorizer\.remaining$`),
				"RateLimit-Reset":     regexp.MustCompile(`^context\.authorizer\.reset$`),
			},
			bodyCode: contract.CodeTooManyRequests,
		},
		{
			responseType: "AUTHORIZER_FAILURE",
			status:       "503",
			headers:      map[string]*regexp.Regexp{"Retry-After": regexp.MustCompile(`^'[1-9][0-9]*'$`)},
			bodyCode:     contract.CodeServiceUnavailable,
		},
		{
			responseType: "AUTHORIZER_CONFIGURATION_ERROR",
			status:       "503",
			headers:      map[string]*regexp.Regexp{"Retry-After": regexp.MustCompile(`^'[1-9][0-9]*'$`)},
			bodyCode:     contract.CodeServiceUnavailable,
		},
	}
	// Header values are mapping expressions: a 'quoted' static value or a
	// value of the authorizer's context, nothing a caller sends.
	valueForm := regexp.MustCompile(`^('[^']*'|context\.authorizer\.[A-Za-z0-9_]+)$`)
	for _, c := range cases {
		t.Run(c.responseType, func(t *testing.T) {
			resp := yamlGet(responses, c.responseType)
			if resp == nil {
				t.Fatalf("no %s gateway response", c.responseType)
			}
			if got := yamlScalar(yamlGet(resp, "StatusCode")); got != c.status {
				t.Errorf("StatusCode: got %q, want %s", got, c.status)
			}
			headers := yamlGet(yamlGet(resp, "ResponseParameters"), "Headers")
			for name, want := range c.headers {
				if got := yamlScalar(yamlGet(headers, name)); !want.MatchString(got) {
					t.Errorf("header %s: got %q, want %v", name, got, want)
				}
			}
			if headers != nil {
				for i := 0; i+1 < len(headers.Content); i += 2 {
					if v := headers.Content[i+1].Value; !valueForm.MatchString(v) {
						t.Errorf("header %s: value %q is neither 'static' nor context.authorizer.<key>", headers.Content[i].Value, v)
					}
				}
			}
			body := yamlScalar(yamlGet(yamlGet(resp, "ResponseTemplates"), "application/json"))
			if !strings.Contains(body, `"code":"`+c.bodyCode+`"`) {
				t.Errorf("application/json body %q: want code %s", body, c.bodyCode)
			}
			if c.status == "503" {
				// Static: the body must be exactly the API function's own
				// 503 for the same Retry-After.
				retry, _ := strconv.ParseInt(strings.Trim(yamlScalar(yamlGet(headers, "Retry-After")), "'"), 10, 64)
				if want := string(contract.ServiceUnavailableBody(retry)); body != want {
					t.Errorf("body:\n got %s\nwant %s", body, want)
				}
			} else if !strings.Contains(body, `"retry_after_seconds":$context.authorizer.retryAfter}`) {
				t.Errorf("body %q: retry_after_seconds must be $context.authorizer.retryAfter", body)
			}
		})
	}
}

// TestTemplateStageVariables: every stage variable the functions read is set
// on the REST API stage (and the HTTP API stage), from a template parameter.
func TestTemplateStageVariables(t *testing.T) {
	tpl := tplLoad(t)
	names := tplStageVariables(t)
	stages := []struct {
		resource, key string
	}{
		{tplRestAPI(t, tpl.root).id, "Variables"},
		{"HttpApiStage", "StageVariables"},
	}
	for _, s := range stages {
		res := yamlGet(yamlGet(tpl.root, "Resources"), s.resource)
		if res == nil {
			t.Errorf("no resource %s", s.resource)
			continue
		}
		vars := yamlGet(yamlGet(res, "Properties"), s.key)
		for _, name := range names {
			v := yamlGet(vars, name)
			if v == nil {
				t.Errorf("%s.%s: stage variable %s missing", s.resource, s.key, name)
				continue
			}
			param, ok := yamlRef(v)
			if !ok || yamlGet(yamlGet(tpl.root, "Parameters"), param) == nil {
				t.Errorf("%s.%s.%s: %s is not a template parameter", s.resource, s.key, name, yamlString(v))
			}
		}
	}
	typedAPI, err := tpl.typed.GetServerlessApiWithName(tplRestAPI(t, tpl.root).id)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, name := range names {
		if _, ok := typedAPI.Variables[name]; !ok {
			t.Errorf("goformation: RestApi Variables lack %s", name)
		}
	}
}

// TestTemplateCacheOnlyFromFunctions: the cache's security group admits the
// functions' security group on the Redis port and nothing else.
func TestTemplateCacheOnlyFromFunctions(t *testing.T) {
	tpl := tplLoad(t)
	resources := yamlGet(tpl.root, "Resources")
	functionSGs := map[string]bool{}
	for _, id := range tplFunctionIDs {
		for _, sg := range tplFunctionSGs(t, tpl.root, id) {
			functionSGs[sg] = true
		}
	}
	cacheSGs := map[string]bool{}
	for _, typ := range []string{"AWS::ElastiCache::ReplicationGroup", "AWS::ElastiCache::ServerlessCache"} {
		for _, res := range tplResources(tpl.root, typ) {
			groups := yamlGet(yamlGet(res.node, "Properties"), "SecurityGroupIds")
			if groups == nil || len(groups.Content) == 0 {
				t.Errorf("%s: no SecurityGroupIds (the VPC default group would apply)", res.id)
				continue
			}
			for _, g := range groups.Content {
				sg, ok := yamlRef(g)
				if !ok {
					t.Errorf("%s: security group %s is not one of this template's", res.id, yamlString(g))
					continue
				}
				cacheSGs[sg] = true
			}
		}
	}
	if len(cacheSGs) == 0 {
		t.Fatalf("no ElastiCache resource with security groups")
	}
	for sg := range cacheSGs {
		if functionSGs[sg] {
			t.Errorf("%s is both the functions' and the cache's security group", sg)
		}
		props := yamlGet(yamlGet(resources, sg), "Properties")
		if in := yamlGet(props, "SecurityGroupIngress"); in != nil && len(in.Content) > 0 {
			t.Errorf("%s: inline SecurityGroupIngress %s; use one rule from the functions' group", sg, yamlString(in))
		}
		rules := 0
		for _, rule := range tplResources(tpl.root, "AWS::EC2::SecurityGroupIngress") {
			p := yamlGet(rule.node, "Properties")
			if target, _ := yamlRef(yamlGet(p, "GroupId")); target != sg {
				continue
			}
			rules++
			source, _ := yamlRef(yamlGet(p, "SourceSecurityGroupId"))
			if !functionSGs[source] {
				t.Errorf("%s: source %q is not the functions' security group", rule.id, source)
			}
			for _, open := range []string{"CidrIp", "CidrIpv6", "SourcePrefixListId"} {
				if yamlGet(p, open) != nil {
					t.Errorf("%s: %s opens the cache beyond the functions", rule.id, open)
				}
			}
			if got := yamlScalar(yamlGet(p, "FromPort")); got != "6379" {
				t.Errorf("%s: FromPort %q, want 6379", rule.id, got)
			}
		}
		if rules == 0 {
			t.Errorf("%s: no ingress rule from the functions' security group", sg)
		}
	}
}

// TestTemplateLeastPrivilege: no IAM action or resource of the template's
// own policies is a wildcard, and the managed policies are the two the
// functions need (VPC network interfaces, X-Ray writes).
func TestTemplateLeastPrivilege(t *testing.T) {
	tpl := tplLoad(t)
	allowedManaged := map[string]bool{"AWSLambdaVPCAccessExecutionRole": true, "AWSXRayDaemonWriteAccess": true}
	statements := 0
	var walkStatements func(n *yaml.Node, where string)
	walkStatements = func(n *yaml.Node, where string) {
		if n == nil {
			return
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				key, val := n.Content[i].Value, n.Content[i+1]
				switch key {
				case "NotAction", "NotResource":
					t.Errorf("%s: %s grants everything else", where, key)
				case "Action":
					statements++
					for _, a := range yamlScalars(val) {
						if strings.Contains(a, "*") {
							t.Errorf("%s: wildcard action %q", where, a)
						}
					}
				case "Resource":
					for _, r := range yamlScalars(val) {
						if r == "*" || strings.HasSuffix(r, ":*") {
							t.Errorf("%s: wildcard resource %q", where, r)
						}
					}
				}
				walkStatements(val, where)
			}
			return
		}
		for _, c := range n.Content {
			walkStatements(c, where)
		}
	}
	resources := yamlGet(tpl.root, "Resources")
	for i := 0; i+1 < len(resources.Content); i += 2 {
		id, res := resources.Content[i].Value, resources.Content[i+1]
		typ := yamlScalar(yamlGet(res, "Type"))
		props := yamlGet(res, "Properties")
		switch {
		case typ == "AWS::Serverless::Function":
			policies := yamlGet(props, "Policies")
			for _, p := range yamlItems(policies) {
				if p.Kind == yaml.ScalarNode && p.Tag != "!Ref" && !allowedManaged[p.Value] {
					t.Errorf("%s: managed policy %q is broader than the function needs", id, p.Value)
				}
			}
			walkStatements(policies, id)
		case strings.HasPrefix(typ, "AWS::IAM::"):
			walkStatements(props, id)
		}
	}
	if statements == 0 {
		t.Errorf("no policy statement found: the secret read must be granted explicitly")
	}
}

// --- helpers over the YAML of the template

type tplResource struct {
	id   string
	node *yaml.Node
}

func tplResources(root *yaml.Node, typ string) []tplResource {
	resources := yamlGet(root, "Resources")
	var out []tplResource
	if resources == nil {
		return nil
	}
	for i := 0; i+1 < len(resources.Content); i += 2 {
		if yamlScalar(yamlGet(resources.Content[i+1], "Type")) == typ {
			out = append(out, tplResource{resources.Content[i].Value, resources.Content[i+1]})
		}
	}
	return out
}

func tplRestAPI(t *testing.T, root *yaml.Node) tplResource {
	t.Helper()
	apis := tplResources(root, "AWS::Serverless::Api")
	if len(apis) != 1 {
		t.Fatalf("want one AWS::Serverless::Api, got %d", len(apis))
	}
	return apis[0]
}

// tplFunctionSGs are the logical IDs of the security groups of a
// function's VpcConfig, its own or the Globals'.
func tplFunctionSGs(t *testing.T, root *yaml.Node, id string) []string {
	t.Helper()
	vpc := yamlGet(yamlGet(yamlGet(yamlGet(root, "Resources"), id), "Properties"), "VpcConfig")
	if vpc == nil {
		vpc = yamlGet(yamlGet(yamlGet(root, "Globals"), "Function"), "VpcConfig")
	}
	var out []string
	for _, g := range yamlItems(yamlGet(vpc, "SecurityGroupIds")) {
		if sg, ok := yamlRef(g); ok {
			out = append(out, sg)
		}
	}
	if yamlGet(vpc, "SubnetIds") == nil {
		t.Errorf("%s: VpcConfig without SubnetIds", id)
	}
	return out
}

func yamlGet(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func yamlDelete(n *yaml.Node, key string) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			n.Content = append(n.Content[:i], n.Content[i+2:]...)
			return
		}
	}
}

func yamlScalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// yamlScalars are the plain values of a yamlScalar or a sequence of yamlScalars.
func yamlScalars(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		if c.Kind == yaml.ScalarNode && c.Tag != "!Ref" && c.Tag != "!Sub" && c.Tag != "!GetAtt" {
			out = append(out, c.Value)
		}
	}
	return out
}

// yamlItems are a sequence's items, and the items of each branch of an
// !If item (SAM allows conditional policies).
func yamlItems(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	var out []*yaml.Node
	for _, c := range n.Content {
		if c.Tag == "!If" && c.Kind == yaml.SequenceNode && len(c.Content) == 3 {
			out = append(out, c.Content[1], c.Content[2])
			continue
		}
		out = append(out, c)
	}
	return out
}

// yamlRef is the logical ID a !Ref, !GetAtt, Ref or Fn::GetAtt names.
func yamlRef(n *yaml.Node) (string, bool) {
	if n == nil {
		return "", false
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!Ref":
		return n.Value, true
	case n.Kind == yaml.ScalarNode && n.Tag == "!GetAtt":
		id, _, _ := strings.Cut(n.Value, ".")
		return id, true
	case n.Kind == yaml.SequenceNode && n.Tag == "!GetAtt" && len(n.Content) > 0:
		return n.Content[0].Value, true
	case n.Kind == yaml.MappingNode:
		if r := yamlGet(n, "Ref"); r != nil {
			return r.Value, true
		}
		if g := yamlGet(n, "Fn::GetAtt"); g != nil {
			if g.Kind == yaml.SequenceNode && len(g.Content) > 0 {
				return g.Content[0].Value, true
			}
			id, _, _ := strings.Cut(g.Value, ".")
			return id, true
		}
	}
	return "", false
}

func yamlString(n *yaml.Node) string {
	if n == nil {
		return "<missing>"
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return "<unprintable>"
	}
	return strings.TrimSpace(string(out))
}

func tplMetadata(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// --- helpers over the rest of the repository

// tplMakeTargets are the build-* targets of the Makefile and mk/*.mk.
func tplMakeTargets(t *testing.T) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob("../mk/*.mk")
	files = append(files, "../Makefile")
	targets := map[string]bool{}
	rule := regexp.MustCompile(`^([^\t#=:][^=:]*):([^=]|$)`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			m := rule.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			for _, name := range strings.Fields(m[1]) {
				if strings.HasPrefix(name, "build-") {
					targets[name] = true
				}
			}
		}
	}
	return targets
}

// tplStageVariables are the contract's stage variables and every "rateLimit*"
// string the functions' code holds.
func tplStageVariables(t *testing.T) []string {
	t.Helper()
	names := map[string]bool{}
	for _, n := range tplSpecStageVars {
		names[n] = true
	}
	literal := regexp.MustCompile(`"(rateLimit[A-Z][A-Za-z]*)"`)
	for _, dir := range []string{"../internal", "../functions", "../pkg"} {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("read %s: %v", path, err)
				return nil
			}
			for _, m := range literal.FindAllSubmatch(raw, -1) {
				names[string(m[1])] = true
			}
			return nil
		})
	}
	// Not a variable but the prefix of one per plan (rateLimitPlanPro),
	// which the operator sets for the plans a stage changes: the template
	// knows no plan names.
	delete(names, config.StageVarPlanPrefix)
	return tplSortedKeys(names)
}

func tplSortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func tplDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func tplFirst(values ...string) string {
	i := slices.IndexFunc(values, func(s string) bool { return s != "" })
	if i < 0 {
		return ""
	}
	return values[i]
}

// tplCheckAlarmsWatch fails t for each CloudWatch alarm of the template
// that no EMF record among records feeds: an alarm matches a metric by
// namespace, name and exact dimension set (names and values), so a record
// must define the metric under a directive with the alarm's namespace and
// that very dimension set, and carry the alarm's dimension values.
func tplCheckAlarmsWatch(t *testing.T, records []map[string]any) {
	t.Helper()
	tpl := tplLoad(t)
	alarms := tplResources(tpl.root, "AWS::CloudWatch::Alarm")
	if len(alarms) == 0 {
		t.Fatalf("template.yaml has no alarms")
	}
	for _, alarm := range alarms {
		props := yamlGet(alarm.node, "Properties")
		if strings.Contains(yamlString(yamlGet(props, "Metrics")), `"AWS/ElastiCache"`) {
			continue // the cache's own metrics, which AWS publishes, not a decision's
		}
		namespace, metric := yamlScalar(yamlGet(props, "Namespace")), yamlScalar(yamlGet(props, "MetricName"))
		want := map[string]string{}
		for _, d := range yamlItems(yamlGet(props, "Dimensions")) {
			want[yamlScalar(yamlGet(d, "Name"))] = yamlScalar(yamlGet(d, "Value"))
		}
		if !slices.ContainsFunc(records, func(r map[string]any) bool { return emfFeeds(r, namespace, metric, want) }) {
			t.Errorf("alarm %s watches %s/%s with dimensions %v, which no record of a real decision publishes", alarm.id, namespace, metric, want)
		}
	}
}

// emfFeeds reports whether an EMF record publishes metric in namespace with
// exactly the dimensions dims (name to value).
func emfFeeds(record map[string]any, namespace, metric string, dims map[string]string) bool {
	meta, _ := record["_aws"].(map[string]any)
	directives, _ := meta["CloudWatchMetrics"].([]any)
	for _, d := range directives {
		dir, _ := d.(map[string]any)
		if dir["Namespace"] != namespace {
			continue
		}
		defined := false
		metrics, _ := dir["Metrics"].([]any)
		for _, m := range metrics {
			if def, _ := m.(map[string]any); def["Name"] == metric {
				defined = true
			}
		}
		if !defined || record[metric] == nil {
			continue
		}
		sets, _ := dir["Dimensions"].([]any)
		for _, set := range sets {
			names, _ := set.([]any)
			if len(names) != len(dims) {
				continue
			}
			match := true
			for _, n := range names {
				name, _ := n.(string)
				value, ok := dims[name]
				if !ok || record[name] != value {
					match = false
				}
			}
			if match {
				return true
			}
		}
	}
	return false
}

// TestTemplateEnvironmentIsRead: every environment variable the template
// gives the functions, in Globals or on one function, is read by their code
// (a misspelt name would be silently ignored, leaving its default in
// force).
func TestTemplateEnvironmentIsRead(t *testing.T) {
	tpl := tplLoad(t)
	vars := yamlGet(yamlGet(yamlGet(yamlGet(tpl.root, "Globals"), "Function"), "Environment"), "Variables")
	if vars == nil || len(vars.Content) == 0 {
		t.Fatalf("Globals.Function.Environment.Variables missing")
	}
	sets := []*yaml.Node{vars}
	for _, id := range tplFunctionIDs {
		fn := yamlGet(yamlGet(tpl.root, "Resources"), id)
		if own := yamlGet(yamlGet(yamlGet(fn, "Properties"), "Environment"), "Variables"); own != nil {
			sets = append(sets, own)
		}
	}
	var source strings.Builder
	for _, dir := range []string{"../internal", "../pkg", "../functions"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			source.Write(b)
			return err
		})
		if err != nil {
			t.Fatalf("read sources: %v", err)
		}
	}
	code := source.String()
	for _, vars := range sets {
		for i := 0; i+1 < len(vars.Content); i += 2 {
			name := vars.Content[i].Value
			if !strings.Contains(code, strconv.Quote(name)) {
				t.Errorf("template sets %s, which no function code reads", name)
			}
		}
	}
}

// TestTemplateHTTPAPIDenials: the authorizer the template's HTTP API uses
// forwards denials and outages (HTTP_API_DENIALS=forward), because that
// HTTP API integrates only the API function, which answers them 429 and
// 503; the API function itself is given no such setting.
func TestTemplateHTTPAPIDenials(t *testing.T) {
	tpl := tplLoad(t)
	resources := yamlGet(tpl.root, "Resources")
	uri := yamlString(yamlGet(yamlGet(yamlGet(resources, "HttpApiAuthorizer"), "Properties"), "AuthorizerUri"))
	if !strings.Contains(uri, "AuthorizerFunction.Arn") {
		t.Fatalf("HttpApiAuthorizer.AuthorizerUri %q: want the AuthorizerFunction", uri)
	}
	target := yamlString(yamlGet(yamlGet(yamlGet(resources, "HttpApiIntegration"), "Properties"), "IntegrationUri"))
	if !strings.Contains(target, "ApiFunction") {
		t.Fatalf("HttpApiIntegration.IntegrationUri %q: forwarding is only for the API function", target)
	}
	envOf := func(id string) *yaml.Node {
		return yamlGet(yamlGet(yamlGet(yamlGet(resources, id), "Properties"), "Environment"), "Variables")
	}
	if got := yamlScalar(yamlGet(envOf("AuthorizerFunction"), "HTTP_API_DENIALS")); got != "forward" {
		t.Errorf("AuthorizerFunction HTTP_API_DENIALS = %q, want forward", got)
	}
	global := yamlGet(yamlGet(yamlGet(yamlGet(tpl.root, "Globals"), "Function"), "Environment"), "Variables")
	if yamlGet(global, "HTTP_API_DENIALS") != nil {
		t.Errorf("Globals set HTTP_API_DENIALS: it belongs to the authorizer alone")
	}
}

// TestTemplateStageThrottle: both stages carry API Gateway's throttle, from
// the ThrottleRateLimit and ThrottleBurstLimit parameters, over every
// route (the REST API's "/*" "*" method setting, the HTTP API's default
// route settings), and samconfig.toml sets both for dev and prod.
func TestTemplateStageThrottle(t *testing.T) {
	tpl := tplLoad(t)
	params := yamlGet(tpl.root, "Parameters")
	for _, p := range []string{"ThrottleRateLimit", "ThrottleBurstLimit"} {
		if yamlScalar(yamlGet(yamlGet(params, p), "Type")) != "Number" {
			t.Errorf("parameter %s: want Type Number", p)
		}
	}
	refOf := func(n *yaml.Node, key string) string {
		ref, _ := yamlRef(yamlGet(n, key))
		return ref
	}
	checkThrottle := func(where string, n *yaml.Node) {
		t.Helper()
		if got := refOf(n, "ThrottlingRateLimit"); got != "ThrottleRateLimit" {
			t.Errorf("%s.ThrottlingRateLimit: !Ref %q, want ThrottleRateLimit", where, got)
		}
		if got := refOf(n, "ThrottlingBurstLimit"); got != "ThrottleBurstLimit" {
			t.Errorf("%s.ThrottlingBurstLimit: !Ref %q, want ThrottleBurstLimit", where, got)
		}
	}
	rest := tplRestAPI(t, tpl.root)
	found := false
	for _, ms := range yamlItems(yamlGet(yamlGet(rest.node, "Properties"), "MethodSettings")) {
		if yamlScalar(yamlGet(ms, "ResourcePath")) == "/*" && yamlScalar(yamlGet(ms, "HttpMethod")) == "*" {
			found = true
			checkThrottle(rest.id+".MethodSettings[/* *]", ms)
		}
	}
	if !found {
		t.Errorf("%s: no MethodSettings entry for every method (ResourcePath /*, HttpMethod *)", rest.id)
	}
	stage := yamlGet(yamlGet(yamlGet(tpl.root, "Resources"), "HttpApiStage"), "Properties")
	checkThrottle("HttpApiStage.DefaultRouteSettings", yamlGet(stage, "DefaultRouteSettings"))

	for _, env := range []string{"dev", "prod"} {
		overrides, err := deployconfig.ParameterOverrides("../samconfig.toml", env)
		if err != nil {
			t.Fatalf("samconfig.toml [%s]: %v", env, err)
		}
		for _, p := range []string{"ThrottleRateLimit", "ThrottleBurstLimit", "RateLimitQuota"} {
			if v := overrides[p]; v == "" {
				t.Errorf("samconfig.toml [%s]: no %s", env, p)
			} else if p != "RateLimitQuota" {
				if n, err := strconv.Atoi(v); err != nil || n < 1 {
					t.Errorf("samconfig.toml [%s]: %s=%q, want a positive whole number", env, p, v)
				}
			}
		}
	}
}

// TestTemplateIdentityHashKey: the template creates the identity hash key
// as a random secret, unconditionally, hands its ARN to both functions
// (RATE_LIMIT_HASH_KEY_SECRET_ARN) and lets each read exactly that secret.
func TestTemplateIdentityHashKey(t *testing.T) {
	tpl := tplLoad(t)
	const secretID = "IdentityHashKeySecret"
	resources := yamlGet(tpl.root, "Resources")
	secret := yamlGet(resources, secretID)
	if yamlScalar(yamlGet(secret, "Type")) != "AWS::SecretsManager::Secret" {
		t.Fatalf("no AWS::SecretsManager::Secret %s", secretID)
	}
	if yamlGet(secret, "Condition") != nil {
		t.Errorf("%s is conditional: every stack needs the key", secretID)
	}
	gen := yamlGet(yamlGet(secret, "Properties"), "GenerateSecretString")
	if n, err := strconv.Atoi(yamlScalar(yamlGet(gen, "PasswordLength"))); err != nil || n < 32 {
		t.Errorf("%s: GenerateSecretString.PasswordLength %q, want a random value of at least 32 characters (the functions refuse shorter keys)", secretID, yamlScalar(yamlGet(gen, "PasswordLength")))
	}
	if yamlGet(yamlGet(secret, "Properties"), "SecretString") != nil {
		t.Errorf("%s: a SecretString in the template is not secret", secretID)
	}
	vars := yamlGet(yamlGet(yamlGet(yamlGet(tpl.root, "Globals"), "Function"), "Environment"), "Variables")
	if ref, ok := yamlRef(yamlGet(vars, "RATE_LIMIT_HASH_KEY_SECRET_ARN")); !ok || ref != secretID {
		t.Errorf("Globals: RATE_LIMIT_HASH_KEY_SECRET_ARN is not !Ref %s", secretID)
	}
	if yamlGet(vars, "RATE_LIMIT_HASH_KEY") != nil {
		t.Error("Globals: RATE_LIMIT_HASH_KEY (a key in clear) is set")
	}
	for _, id := range tplFunctionIDs {
		policies := yamlGet(yamlGet(yamlGet(resources, id), "Properties"), "Policies")
		found := false
		for _, p := range policies.Content { // unconditional items only
			statements := yamlGet(p, "Statement")
			if statements == nil {
				continue
			}
			for _, st := range statements.Content {
				ref, ok := yamlRef(yamlGet(st, "Resource"))
				if !ok || ref != secretID {
					continue
				}
				if yamlScalar(yamlGet(st, "Effect")) != "Allow" || !slices.Equal(yamlScalars(yamlGet(st, "Action")), []string{"secretsmanager:GetSecretValue"}) {
					t.Errorf("%s: the statement on %s grants %v, want only secretsmanager:GetSecretValue", id, secretID, yamlScalars(yamlGet(st, "Action")))
				}
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no unconditional secretsmanager:GetSecretValue on %s", id, secretID)
		}
	}
}

// TestTemplateIPv6: both APIs take the IP address type of the
// ApiIpAddressType parameter (ipv4 or dualstack), and RateLimitIpv6Prefix
// accepts exactly the prefix lengths the functions do (32 to 128) and
// reaches them as RATE_LIMIT_IPV6_PREFIX.
func TestTemplateIPv6(t *testing.T) {
	tpl := tplLoad(t)
	params := yamlGet(tpl.root, "Parameters")
	ipType := yamlGet(params, "ApiIpAddressType")
	if got := yamlScalars(yamlGet(ipType, "AllowedValues")); !slices.Equal(got, []string{"ipv4", "dualstack"}) {
		t.Errorf("ApiIpAddressType AllowedValues %v, want [ipv4 dualstack]", got)
	}
	if yamlScalar(yamlGet(ipType, "Description")) == "" {
		t.Error("ApiIpAddressType has no Description")
	}
	rest := yamlGet(tplRestAPI(t, tpl.root).node, "Properties")
	endpoint := yamlGet(rest, "EndpointConfiguration")
	if ref, ok := yamlRef(yamlGet(endpoint, "IpAddressType")); !ok || ref != "ApiIpAddressType" {
		t.Error("REST API: EndpointConfiguration.IpAddressType is not !Ref ApiIpAddressType")
	}
	if typ := yamlScalar(yamlGet(endpoint, "Type")); typ != "EDGE" && typ != "REGIONAL" {
		t.Errorf("REST API: EndpointConfiguration.Type %q, want EDGE or REGIONAL", typ)
	}
	for _, res := range tplResources(tpl.root, "AWS::ApiGatewayV2::Api") {
		if ref, ok := yamlRef(yamlGet(yamlGet(res.node, "Properties"), "IpAddressType")); !ok || ref != "ApiIpAddressType" {
			t.Errorf("%s: IpAddressType is not !Ref ApiIpAddressType", res.id)
		}
	}

	prefix := yamlGet(params, "RateLimitIpv6Prefix")
	re, err := regexp.Compile("^(?:" + yamlScalar(yamlGet(prefix, "AllowedPattern")) + ")$")
	if err != nil {
		t.Fatalf("RateLimitIpv6Prefix AllowedPattern: %v", err)
	}
	for n := 0; n <= 300; n++ {
		if want := n >= 32 && n <= 128; re.MatchString(strconv.Itoa(n)) != want {
			t.Errorf("RateLimitIpv6Prefix AllowedPattern: %d accepted = %v, want %v", n, !want, want)
		}
	}
	if !re.MatchString(yamlScalar(yamlGet(prefix, "Default"))) {
		t.Errorf("RateLimitIpv6Prefix Default %q does not match its pattern", yamlScalar(yamlGet(prefix, "Default")))
	}
	vars := yamlGet(yamlGet(yamlGet(yamlGet(tpl.root, "Globals"), "Function"), "Environment"), "Variables")
	if ref, ok := yamlRef(yamlGet(vars, "RATE_LIMIT_IPV6_PREFIX")); !ok || ref != "RateLimitIpv6Prefix" {
		t.Error("Globals: RATE_LIMIT_IPV6_PREFIX is not !Ref RateLimitIpv6Prefix")
	}
}

// TestTemplatePlanParameters: the tier parameters take limit lists (days
// included) and refuse what the functions would; the plan, cost, shadow
// and network parameters reach the functions' environment, the shadow list
// also both APIs' stage variables, within what a stage variable value may
// hold; every value the shipped samconfig.toml gives them parses without
// an error in the functions' configuration.
func TestTemplatePlanParameters(t *testing.T) {
	tpl := tplLoad(t)
	params := yamlGet(tpl.root, "Parameters")
	pattern := func(name string) *regexp.Regexp {
		t.Helper()
		re, err := regexp.Compile("^(?:" + yamlScalar(yamlGet(yamlGet(params, name), "AllowedPattern")) + ")$")
		if err != nil {
			t.Fatalf("%s AllowedPattern: %v", name, err)
		}
		return re
	}
	for _, name := range []string{"RateLimitAnonymous", "RateLimitUser", "RateLimitOrg"} {
		re := pattern(name)
		for v, want := range map[string]bool{
			"30/1m": true, "20/1s,600/1m,10000/1d": true, "5/1m:sliding-log,100/1d:token-bucket": true,
			"20/1s,": false, "20/1s 600/1m": false, "1/1m,1/1m,1/1m,1/1m,1/1m,1/1m,1/1m,1/1m,1/1m": false, "lots": false,
		} {
			if re.MatchString(v) != want {
				t.Errorf("%s AllowedPattern: %q accepted = %v, want %v", name, v, !want, want)
			}
		}
	}
	shadow := pattern("RateLimitShadow")
	for v, want := range map[string]bool{"none": true, "pro,user,pro-1d": true, "POST:/v1/reports": true, "POST /v1/reports": false, "GET:/a/*": false} {
		if shadow.MatchString(v) != want {
			t.Errorf("RateLimitShadow AllowedPattern: %q accepted = %v, want %v", v, !want, want)
		}
	}

	env := yamlGet(yamlGet(yamlGet(yamlGet(tpl.root, "Globals"), "Function"), "Environment"), "Variables")
	for variable, param := range map[string]string{
		"RATE_LIMIT_PLANS": "RateLimitPlans", "RATE_LIMIT_COSTS": "RateLimitCosts", "RATE_LIMIT_SHADOW": "RateLimitShadow",
		"RATE_LIMIT_NETWORKS": "RateLimitNetworks", "JWT_PLAN_CLAIM": "JwtPlanClaim",
	} {
		if ref, ok := yamlRef(yamlGet(env, variable)); !ok || ref != param {
			t.Errorf("Globals: %s is not !Ref %s", variable, param)
		}
		if yamlGet(params, param) == nil {
			t.Errorf("no parameter %s", param)
		}
	}

	for _, stage := range []string{"dev", "prod"} {
		spec, err := deployconfig.Load(filepath.Join("..", "template.yaml"), filepath.Join("..", "samconfig.toml"), stage)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		getenv := func(k string) string { return spec.Environment[k] }
		cfg, err := config.FromEnv(getenv)
		if err != nil {
			t.Errorf("stage %s: the functions' configuration reports %v", stage, err)
			continue
		}
		if len(cfg.Plans) == 0 {
			t.Errorf("stage %s: no plan configured; the shipped samconfig.toml sells some", stage)
		}
		if _, err := config.ResolveStage(cfg, config.StageValuesOf(spec.StageVariables)); err != nil {
			t.Errorf("stage %s: its stage variables report %v", stage, err)
		}
	}
}
