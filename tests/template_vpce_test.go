package tests

import (
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// vpceCalledLocally are the IAM service prefixes of the functions' policies
// that make no call out of the VPC: elasticache:Connect authorises the IAM
// token the functions presign themselves and send to Redis.
var vpceCalledLocally = map[string]bool{"elasticache": true}

// TestTemplateVpcEndpoints: with its defaults, each template gives the
// functions a way to every AWS service their own policies let them call,
// in a VPC with no NAT: an interface endpoint in SubnetIds with private
// DNS (so the SDK's default endpoint resolves inside the VPC), whose
// security group admits HTTPS from the functions' group and nothing else.
// Before, neither template created one: on a VPC without NAT every
// Secrets Manager read waited out the cold-start budget.
func TestTemplateVpcEndpoints(t *testing.T) {
	for _, path := range []string{tplPath, tplAuthorizerPath} {
		t.Run(path, func(t *testing.T) {
			tpl := tplLoadFile(t, path)
			param := yamlGet(yamlGet(tpl.root, "Parameters"), "VpcEndpoints")
			if got := yamlScalar(yamlGet(param, "Default")); got != "create" {
				t.Fatalf("VpcEndpoints default %q, want create (the template as it is must work with no NAT)", got)
			}
			called := vpceServicesCalled(t, tpl.root)
			if len(called) == 0 {
				t.Fatal("no AWS service found in the functions' policies")
			}
			endpoints := map[string]*yaml.Node{}
			for _, r := range tplResources(tpl.root, "AWS::EC2::VPCEndpoint") {
				p := yamlGet(r.node, "Properties")
				svc := yamlScalar(yamlGet(p, "ServiceName"))
				name := svc[strings.LastIndex(svc, ".")+1:]
				endpoints[name] = r.node
				if got := yamlScalar(yamlGet(p, "VpcEndpointType")); got != "Interface" {
					t.Errorf("%s: VpcEndpointType %q, want Interface", r.id, got)
				}
				if got := yamlScalar(yamlGet(p, "PrivateDnsEnabled")); got != "true" {
					t.Errorf("%s: PrivateDnsEnabled %q: the SDK's default endpoint would not resolve to it", r.id, got)
				}
				if ref, _ := yamlRef(yamlGet(p, "SubnetIds")); ref != "SubnetIds" {
					t.Errorf("%s: SubnetIds is not the functions' subnets", r.id)
				}
				vpceCheckGroup(t, tpl.root, r.id, yamlItems(yamlGet(p, "SecurityGroupIds")))
			}
			for _, svc := range called {
				ep, ok := endpoints[svc]
				if !ok {
					t.Errorf("the functions call %s, and no interface endpoint reaches it", svc)
					continue
				}
				cond := yamlScalar(yamlGet(ep, "Condition"))
				if !strings.HasPrefix(cond, "Create") {
					t.Errorf("%s's endpoint: condition %q", svc, cond)
				}
			}
			// API Gateway's endpoint only when the keys are listed from it.
			if ep := endpoints["apigateway"]; ep != nil {
				c := yamlGet(yamlGet(tpl.root, "Conditions"), yamlScalar(yamlGet(ep, "Condition")))
				if !strings.Contains(vpceText(t, c), "UsesApiGatewayKeys") {
					t.Errorf("the apigateway endpoint is created even when ApiKeyHashes names the keys: %s", vpceText(t, c))
				}
			}
		})
	}
}

// vpceServicesCalled are the IAM service prefixes of every action the
// template's functions are allowed, less vpceCalledLocally.
func vpceServicesCalled(t *testing.T, root *yaml.Node) []string {
	t.Helper()
	seen := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil {
			return
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "Action" {
					for _, a := range yamlScalars(n.Content[i+1]) {
						if svc, _, ok := strings.Cut(a, ":"); ok && !vpceCalledLocally[svc] {
							seen[svc] = true
						}
					}
				}
				walk(n.Content[i+1])
			}
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	for _, fn := range tplResources(root, "AWS::Serverless::Function") {
		walk(yamlGet(yamlGet(fn.node, "Properties"), "Policies"))
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// vpceCheckGroup: the endpoint's one security group admits TCP 443 from the
// functions' security group only.
func vpceCheckGroup(t *testing.T, root *yaml.Node, id string, groups []*yaml.Node) {
	t.Helper()
	if len(groups) != 1 {
		t.Errorf("%s: %d security groups, want the endpoints' one", id, len(groups))
		return
	}
	sg, _ := yamlRef(groups[0])
	functionSGs := map[string]bool{}
	for _, fid := range tplFunctionIDs {
		for _, g := range tplFunctionSGs(t, root, fid) {
			functionSGs[g] = true
		}
	}
	if functionSGs[sg] {
		t.Errorf("%s: uses the functions' own security group", id)
		return
	}
	rules := yamlItems(yamlGet(yamlGet(yamlGet(yamlGet(root, "Resources"), sg), "Properties"), "SecurityGroupIngress"))
	if len(rules) == 0 {
		t.Errorf("%s: security group %s admits nothing", id, sg)
	}
	for _, rule := range rules {
		src, _ := yamlRef(yamlGet(rule, "SourceSecurityGroupId"))
		if !functionSGs[src] || yamlScalar(yamlGet(rule, "FromPort")) != "443" || yamlScalar(yamlGet(rule, "ToPort")) != "443" ||
			yamlScalar(yamlGet(rule, "IpProtocol")) != "tcp" {
			t.Errorf("%s: ingress rule %s is not HTTPS from the functions only", sg, vpceText(t, rule))
		}
	}
}

func vpceText(t *testing.T, n *yaml.Node) string {
	t.Helper()
	if n == nil {
		return ""
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
