package tests

import (
	"slices"
	"strings"
	"testing"
)

// TestTemplateVpcEndpoints: by default both templates create what the
// functions read at cold start needs in a VPC without a NAT gateway: an
// interface endpoint with private DNS in the functions' subnets for
// Secrets Manager, always, and for API Gateway's management API
// (apigateway, not execute-api) when keys are listed from API Gateway,
// behind a security group open on 443 to the functions' security group
// alone. Before: neither, and every cold start's secret reads waited out
// their budget.
func TestTemplateVpcEndpoints(t *testing.T) {
	for _, path := range []string{tplPath, tplAuthorizerPath} {
		t.Run(path, func(t *testing.T) {
			root := tplLoadFile(t, path).root
			param := yamlGet(yamlGet(root, "Parameters"), "VpcEndpoints")
			if d := yamlScalar(yamlGet(param, "Default")); d != "create" {
				t.Errorf("VpcEndpoints default %q, want create", d)
			}
			if got := yamlScalars(yamlGet(param, "AllowedValues")); !slices.Equal(got, []string{"create", "none"}) {
				t.Errorf("VpcEndpoints AllowedValues %v", got)
			}
			want := map[string]struct{ service, condition string }{
				"SecretsManagerEndpoint": {"secretsmanager", "CreateVpcEndpoints"},
				"ApiGatewayEndpoint":     {"apigateway", "CreateApiGatewayEndpoint"},
			}
			endpoints := tplResources(root, "AWS::EC2::VPCEndpoint")
			if len(endpoints) != len(want) {
				t.Fatalf("%d VPC endpoints, want %d", len(endpoints), len(want))
			}
			for _, r := range endpoints {
				w, ok := want[r.id]
				if !ok {
					t.Errorf("unexpected endpoint %s", r.id)
					continue
				}
				props := yamlGet(r.node, "Properties")
				if c := yamlScalar(yamlGet(r.node, "Condition")); c != w.condition {
					t.Errorf("%s: Condition %q, want %s", r.id, c, w.condition)
				}
				if s := yamlSub(yamlGet(props, "ServiceName")); s != "com.amazonaws.${AWS::Region}."+w.service {
					t.Errorf("%s: ServiceName %q", r.id, s)
				}
				if yamlScalar(yamlGet(props, "VpcEndpointType")) != "Interface" || yamlScalar(yamlGet(props, "PrivateDnsEnabled")) != "true" {
					t.Errorf("%s: not an interface endpoint with private DNS", r.id)
				}
				if ref, ok := yamlRef(yamlGet(props, "SubnetIds")); !ok || ref != "SubnetIds" {
					t.Errorf("%s: SubnetIds is not !Ref SubnetIds", r.id)
				}
				if sgs := yamlItems(yamlGet(props, "SecurityGroupIds")); len(sgs) != 1 || !strings.Contains(yamlString(sgs[0]), "EndpointSecurityGroup") {
					t.Errorf("%s: security groups are not EndpointSecurityGroup's", r.id)
				}
			}
			conds := yamlGet(root, "Conditions")
			if c := yamlGet(conds, "CreateApiGatewayEndpoint"); c == nil || !strings.Contains(yamlString(c)+denyYAMLText(t, c), "UsesApiGatewayKeys") {
				t.Errorf("CreateApiGatewayEndpoint does not depend on UsesApiGatewayKeys")
			}
			var sg *tplResource
			for _, r := range tplResources(root, "AWS::EC2::SecurityGroup") {
				if r.id == "EndpointSecurityGroup" {
					sg = &r
				}
			}
			if sg == nil {
				t.Fatal("no EndpointSecurityGroup")
			}
			rules := yamlItems(yamlGet(yamlGet(sg.node, "Properties"), "SecurityGroupIngress"))
			if len(rules) != 1 || yamlScalar(yamlGet(rules[0], "FromPort")) != "443" || yamlScalar(yamlGet(rules[0], "ToPort")) != "443" ||
				yamlScalar(yamlGet(rules[0], "IpProtocol")) != "tcp" || !strings.Contains(denyYAMLText(t, yamlGet(rules[0], "SourceSecurityGroupId")), "FunctionSecurityGroup") {
				t.Errorf("EndpointSecurityGroup's ingress is not 443 from FunctionSecurityGroup alone: %s", denyYAMLText(t, yamlGet(yamlGet(sg.node, "Properties"), "SecurityGroupIngress")))
			}
		})
	}
}
