package tests

import (
	"os"
	"strings"
	"testing"
)

// TestTemplateVerifyCommandOutputs: template.yaml's outputs print the
// exact slidegate verify command for each API it creates, on the URL of
// ApiUrl and HttpApiUrl, with the API type flag verify takes.
func TestTemplateVerifyCommandOutputs(t *testing.T) {
	outputs := yamlGet(tplLoad(t).root, "Outputs")
	for _, tt := range []struct{ command, url, api, condition string }{
		{"VerifyCommand", "ApiUrl", "rest", ""},
		{"HttpApiVerifyCommand", "HttpApiUrl", "http", "EnableHttpApi"},
	} {
		out, url := yamlGet(outputs, tt.command), yamlGet(outputs, tt.url)
		if out == nil || url == nil {
			t.Fatalf("Outputs.%s or Outputs.%s missing", tt.command, tt.url)
		}
		got, want := yamlSub(yamlGet(out, "Value")), "slidegate verify --url "+yamlSub(yamlGet(url, "Value"))+" --api "+tt.api
		if got != want {
			t.Errorf("%s = %q, want %q", tt.command, got, want)
		}
		if c := yamlScalar(yamlGet(out, "Condition")); c != tt.condition {
			t.Errorf("%s: Condition %q, want %q (that of %s)", tt.command, c, tt.condition, tt.url)
		}
	}
	// The flags it names are verify's.
	raw, err := os.ReadFile("../cmd/slidegate/verify.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"url", "api"} {
		if !strings.Contains(string(raw), `fs.StringVar(&f.`+flag+`, "`+flag+`"`) {
			t.Errorf("slidegate verify has no flag -%s", flag)
		}
	}
}

// TestTemplateApiAccessLog: the access log is off by default, and on
// writes to the stack's own log group, kept 30 days, from the REST
// stage and the HTTP API stage.
func TestTemplateApiAccessLog(t *testing.T) {
	root := tplLoad(t).root
	if d := yamlScalar(yamlGet(yamlGet(yamlGet(root, "Parameters"), "ApiAccessLog"), "Default")); d != "off" {
		t.Errorf("ApiAccessLog default %q, want off", d)
	}
	group := yamlGet(yamlGet(root, "Resources"), "ApiAccessLogGroup")
	if yamlScalar(yamlGet(group, "Condition")) != "HasApiAccessLog" || yamlScalar(yamlGet(yamlGet(group, "Properties"), "RetentionInDays")) != "30" {
		t.Errorf("ApiAccessLogGroup: want Condition HasApiAccessLog and 30 days")
	}
	for _, where := range [][]string{{"RestApi", "AccessLogSetting"}, {"HttpApiStage", "AccessLogSettings"}} {
		n := yamlGet(yamlGet(yamlGet(yamlGet(root, "Resources"), where[0]), "Properties"), where[1])
		if n == nil || n.Tag != "!If" || len(n.Content) != 3 || n.Content[0].Value != "HasApiAccessLog" {
			t.Errorf("%s.%s: want !If [HasApiAccessLog, ..., !Ref AWS::NoValue]", where[0], where[1])
			continue
		}
		format := yamlScalar(yamlGet(n.Content[1], "Format"))
		if !strings.Contains(format, "$context.requestId") || !strings.Contains(denyYAMLText(t, yamlGet(n.Content[1], "DestinationArn")), "ApiAccessLogGroup") {
			t.Errorf("%s.%s: format %q or destination not the stack's log group", where[0], where[1], format)
		}
	}
}

// TestTemplateCacheEvictionsAlarm: both templates alarm on the first
// eviction of ElastiCache's Evictions metric, and show the alarm on the
// dashboard. Before: nothing watched evictions.
func TestTemplateCacheEvictionsAlarm(t *testing.T) {
	for _, path := range []string{tplPath, tplAuthorizerPath} {
		root := tplLoadFile(t, path).root
		alarm := yamlGet(yamlGet(root, "Resources"), "CacheEvictionsAlarm")
		props := yamlGet(alarm, "Properties")
		metrics := yamlItems(yamlGet(props, "Metrics"))
		if alarm == nil || len(metrics) != 1 {
			t.Fatalf("%s: no CacheEvictionsAlarm with one query", path)
		}
		if q := yamlScalar(yamlGet(metrics[0], "Expression")); q != `SELECT MAX(Evictions) FROM "AWS/ElastiCache"` {
			t.Errorf("%s: query %q", path, q)
		}
		if yamlScalar(yamlGet(props, "Threshold")) != "0" || yamlScalar(yamlGet(props, "ComparisonOperator")) != "GreaterThanThreshold" ||
			yamlScalar(yamlGet(props, "TreatMissingData")) != "notBreaching" {
			t.Errorf("%s: want any eviction to alarm, none missing data", path)
		}
		body := yamlSub(yamlGet(yamlGet(yamlGet(yamlGet(root, "Resources"), "Dashboard"), "Properties"), "DashboardBody"))
		if !strings.Contains(body, "${CacheEvictionsAlarm.Arn}") {
			t.Errorf("%s: CacheEvictionsAlarm is not on the dashboard", path)
		}
	}
}
