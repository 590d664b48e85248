package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// The dashboard and Contributor Insights tests read template.yaml's
// AWS::CloudWatch::Dashboard body and each AWS::CloudWatch::InsightRule
// body (JSON strings under !Sub, whose placeholders are resolved with fake
// values), and check every metric, dimension set, dimension value and log
// field they name against the EMF records and log lines of a real run of
// the functions (real redis-server, real handlers, real event payloads).
// A widget or a rule that reads something the code never writes stays
// empty in CloudWatch without any error: only such a check catches it.

// Fake values of the pseudo parameters in the template's !Sub strings.
const (
	dashRegion    = "eu-west-3"
	dashAccount   = "123456789012"
	dashStackName = "obs-stack"
)

// dashLambdaMetrics are the AWS/Lambda metrics the dashboard may read: Lambda
// publishes each per function (dimension FunctionName).
var dashLambdaMetrics = []string{"Duration", "Errors", "Throttles", "Invocations", "ConcurrentExecutions"}

// dashStat matches the statistics a metric widget may ask for.
var dashStat = regexp.MustCompile(`^(Sum|Average|Minimum|Maximum|SampleCount|p(\d{1,2}(\.\d+)?|100))$`)

// dashFake is the fake value a !Sub placeholder resolves to.
func dashFake(tpl tplTemplate, name string) (string, error) {
	switch name {
	case "AWS::Region":
		return dashRegion, nil
	case "AWS::AccountId":
		return dashAccount, nil
	case "AWS::StackName":
		return dashStackName, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	}
	id, attr, _ := strings.Cut(name, ".")
	if p := yamlGet(yamlGet(tpl.root, "Parameters"), id); p != nil && attr == "" {
		if d := yamlScalar(yamlGet(p, "Default")); d != "" {
			return d, nil
		}
		return "param-" + id, nil
	}
	res := yamlGet(yamlGet(tpl.root, "Resources"), id)
	if res == nil {
		return "", fmt.Errorf("${%s} names no parameter, resource or pseudo parameter of the template", name)
	}
	switch typ := yamlScalar(yamlGet(res, "Type")); {
	case attr == "":
		return "fake-" + id, nil
	case typ == "AWS::CloudWatch::Alarm" && attr == "Arn":
		return dashAlarmARN(id), nil
	case typ == "AWS::CloudWatch::InsightRule" && attr == "RuleName":
		return "rule-" + id, nil
	default:
		return "", fmt.Errorf("${%s}: attribute %s of a %s is not one this test resolves", name, attr, typ)
	}
}

// dashAlarmARN is the fake ARN of an alarm resource.
func dashAlarmARN(id string) string {
	return "arn:aws:cloudwatch:" + dashRegion + ":" + dashAccount + ":alarm:fake-" + id
}

var dashPlaceholder = regexp.MustCompile(`\$\{([^}]*)\}`)

// dashResolve resolves the placeholders of a !Sub string: ${!X} is the
// literal ${X}, every other one must name something the template has.
func dashResolve(tpl tplTemplate, s string) (string, []error) {
	var errs []error
	out := dashPlaceholder.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		v, err := dashFake(tpl, name)
		if err != nil {
			errs = append(errs, err)
			return m
		}
		return v
	})
	return out, errs
}

// dashSub is the string of a property that must be a !Sub scalar.
func dashSub(t *testing.T, n *yaml.Node, what string) string {
	t.Helper()
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag != "!Sub" {
		t.Fatalf("%s: want a !Sub string, got %s", what, yamlString(n))
	}
	return n.Value
}

// dashRun is what a real run of the functions wrote.
type dashRun struct {
	records []map[string]any // EMF records
	lines   []map[string]any // log lines
}

// dashRealRun decides as the functions do, against a real redis-server,
// every outcome the dashboard and the rules are about: allowed, denied
// (anonymous, user and org), a bad API key and a forged token (rejected),
// then with Redis stopped degraded and fail-closed (rejected) decisions
// and the circuit breaker's opening.
func dashRealRun(t *testing.T) dashRun {
	t.Helper()
	srv := redistest.StartServer(t)
	// Live controls, set before the functions start so that their first
	// read of the controls (the network controls and the watched callers)
	// holds them, with no wait for a warm instance's watch: a blocked, an exempt, a
	// scaled caller and one whose record is malformed; a blocked and an
	// exempt network.
	op := controlLimiter(t, srv.Client(t))
	setControl(t, op, "ip:198.51.100.150", controls.Block, 0, time.Hour)
	setControl(t, op, "ip:198.51.100.151", controls.Exempt, 0, time.Hour)
	setControl(t, op, "ip:198.51.100.152", controls.Scale, 10, time.Hour)
	setControl(t, op, "ip:198.51.100.153", controls.Block, 0, time.Hour)
	if err := srv.Client(t).Set(context.Background(), dashControlKey(t, srv.Client(t), "ip:198.51.100.153"), "v1 b garbage 0 {}", redis.KeepTTL).Err(); err != nil {
		t.Fatal(err)
	}
	for network, kind := range map[string]controls.Kind{"198.18.0.0/24": controls.Block, "198.18.1.0/24": controls.Exempt} {
		if err := op.Controls().SetNetwork(context.Background(), netip.MustParsePrefix(network), controls.Control{Kind: kind, Until: time.Now().Add(time.Hour), Reason: "dashboard test"}); err != nil {
			t.Fatal(err)
		}
	}
	fn := obsStart(t, obsEnv(srv.URL(), map[string]string{
		"RATE_LIMIT_ROUTES":   "POST /auth/*=5/1m:sliding-log,GET /v1/shadowed=1/1m",
		"RATE_LIMIT_SHADOW":   "GET /v1/shadowed",
		"RATE_LIMIT_NETWORKS": "192.0.2.0/24=blocked,203.0.113.0/24=unlimited",
		// One in flight on the slow route: a second request at once is
		// refused by the in-flight limit.
		"RATE_LIMIT_CONCURRENCY": "GET /v1/slow=1",
	}))
	token := azToken(t, obsJWTSecret, obsSubject)
	forged := azToken(t, "not-the-secret-at-all", obsSubject)
	rest := func(ip, method, path string, headers map[string]string) []byte {
		return obsRESTAuthorizerEvent(t, azRequest{method: method, path: path, ip: ip, headers: headers}, "dash-request")
	}
	var n int
	invoke := func(function string, payload []byte) {
		n++
		fn.invoke(t, function, payload)
	}
	// A slow request of each tier holds its caller's only slot of the
	// slow route (its decision and its InFlight record) while a second is
	// refused (its decision, a ConcurrencyDenials record and an in-flight
	// denial line), first: before the floods below spend their rate limits.
	slowCallers := []map[string]string{nil, {"Authorization": "Bearer " + token}, {"x-api-key": obsKnownKey}}
	held := make(chan struct{}, len(slowCallers))
	for i, headers := range slowCallers {
		go func() {
			_, _ = fn.api.Invoke(context.Background(), obsAPIEvent(t, "GET", "/v1/slow", fmt.Sprintf("198.51.100.%d", 200+i), "dash-slow", headers, ""))
			held <- struct{}{}
		}()
	}
	for slots, deadline := srv.Client(t), time.Now().Add(10*time.Second); ; time.Sleep(10 * time.Millisecond) {
		keys, err := slots.Keys(context.Background(), "*:cc:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) == len(slowCallers) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d slow requests hold a slot after 10s", len(keys), len(slowCallers))
		}
	}
	for i, headers := range slowCallers {
		invoke("api", obsAPIEvent(t, "GET", "/v1/slow", fmt.Sprintf("198.51.100.%d", 200+i), "dash-slow-refused", headers, ""))
	}
	for range slowCallers {
		<-held
	}
	// Each holder's decision and InFlight, each refusal's ConcurrencyDenials.
	n += 3 * len(slowCallers)

	for range 3 { // anonymous limit 2: allowed, allowed, denied
		invoke("authorizer", rest("198.51.100.120", "GET", "/v1/items", nil))
	}
	for range 5 { // user limit 4
		invoke("authorizer", rest("198.51.100.121", "GET", "/v1/items", map[string]string{"Authorization": "Bearer " + token}))
	}
	for range 6 { // org limit 5
		invoke("authorizer", rest("198.51.100.122", "GET", "/v1/items", map[string]string{"x-api-key": obsKnownKey}))
	}
	invoke("authorizer", rest("198.51.100.123", "GET", "/v1/items", map[string]string{"x-api-key": obsUnknownKey}))
	invoke("authorizer", rest("198.51.100.124", "GET", "/v1/items", map[string]string{"Authorization": "Bearer " + forged}))
	invoke("api", obsAPIEvent(t, "GET", "/v1/items", "198.51.100.125", "dash-api", nil, ""))
	for range 3 { // the API function's own decisions, denied on the third
		invoke("api", obsHTTPAPIEvent(t, "GET", "/v1/items", "198.51.100.126", "dash-http", nil, ""))
	}
	for range 2 { // the shadow route limit 1: allowed, shadow-denied
		invoke("authorizer", rest("198.51.100.128", "GET", "/v1/shadowed", nil))
	}
	invoke("authorizer", rest("192.0.2.9", "GET", "/v1/items", nil))   // blocked
	invoke("authorizer", rest("203.0.113.9", "GET", "/v1/items", nil)) // unlimited
	for _, ip := range []string{"198.51.100.150", "198.51.100.151", "198.51.100.152", "198.51.100.153", "198.18.0.9", "198.18.1.9"} {
		invoke("authorizer", rest(ip, "GET", "/v1/items", nil)) // under a live control
	}
	for range 30 { // the scaled caller's 20 of 2 x 10, then denied
		invoke("authorizer", rest("198.51.100.152", "GET", "/v1/items", nil))
	}
	srv.Stop()
	invoke("authorizer", rest("198.51.100.127", "GET", "/v1/items", nil))
	invoke("authorizer", rest("198.51.100.127", "POST", "/auth/login", nil))
	opened := false
	for i := 0; i < 60 && !opened; i++ { // until the breaker opens (the slow route's acquires and releases were Redis successes too)
		n++
		out, _ := fn.invoke(t, "authorizer", rest(fmt.Sprintf("198.51.100.%d", 130+i), "GET", "/v1/items", nil))
		opened = len(out.metrics) == 1 && out.metrics[0]["BreakerStateChanges"] != nil
	}
	if !opened {
		t.Fatal("the circuit breaker did not open after 60 decisions with Redis stopped")
	}
	out := obsParse(t, fn.stdout.String())
	if len(out.metrics) != n {
		t.Fatalf("%d EMF records for %d decisions", len(out.metrics), n)
	}
	return dashRun{records: out.metrics, lines: out.logs}
}

// dashControlKey is the Redis key of identity's control record: the one
// key ending in :ctl on the server, found after Store.Set wrote it.
func dashControlKey(t *testing.T, client *redis.Client, identity string) string {
	t.Helper()
	keys, err := client.Keys(context.Background(), "*:ctl").Result()
	if err != nil {
		t.Fatal(err)
	}
	op := controlLimiter(t, client)
	for _, k := range keys {
		before, _ := client.Get(context.Background(), k).Result()
		// The record of identity is the one its GetControl reads.
		if err := client.Set(context.Background(), k, "probe", redis.KeepTTL).Err(); err != nil {
			t.Fatal(err)
		}
		_, _, err := op.Controls().Get(context.Background(), identity)
		if err2 := client.Set(context.Background(), k, before, redis.KeepTTL).Err(); err2 != nil {
			t.Fatal(err2)
		}
		if err != nil {
			return k
		}
	}
	t.Fatalf("no control key of %s among %v", identity, keys)
	return ""
}

// dashRecordsFeed reports whether some record publishes metric in namespace
// under exactly the dimension names of dims, and for each dimension some
// record does so with that dimension's value (the run need not publish
// every combination of values; each value must be one the code writes).
func dashRecordsFeed(records []map[string]any, namespace, metric string, dims map[string]string) error {
	names := make([]string, 0, len(dims))
	for k := range dims {
		names = append(names, k)
	}
	sort.Strings(names)
	var setSeen bool
	valueSeen := map[string]bool{}
	for _, r := range records {
		if !emfDefinesWithDims(r, namespace, metric, names) {
			continue
		}
		setSeen = true
		for _, k := range names {
			if r[k] == dims[k] {
				valueSeen[k] = true
			}
		}
	}
	if !setSeen {
		return fmt.Errorf("%s/%s with the dimension set %v: no record of a real run publishes it", namespace, metric, names)
	}
	for _, k := range names {
		if !valueSeen[k] {
			return fmt.Errorf("%s/%s: dimension %s=%q: no record of a real run carries that value", namespace, metric, k, dims[k])
		}
	}
	return nil
}

// emfDefinesWithDims reports whether a record defines metric in namespace
// under a dimension set of exactly names, and carries its value.
func emfDefinesWithDims(record map[string]any, namespace, metric string, names []string) bool {
	if record[metric] == nil {
		return false
	}
	meta, _ := record["_aws"].(map[string]any)
	directives, _ := meta["CloudWatchMetrics"].([]any)
	for _, d := range directives {
		dir, _ := d.(map[string]any)
		if dir["Namespace"] != namespace {
			continue
		}
		metrics, _ := dir["Metrics"].([]any)
		if !slices.ContainsFunc(metrics, func(m any) bool { def, _ := m.(map[string]any); return def["Name"] == metric }) {
			continue
		}
		sets, _ := dir["Dimensions"].([]any)
		for _, set := range sets {
			raw, _ := set.([]any)
			got := make([]string, 0, len(raw))
			for _, n := range raw {
				s, _ := n.(string)
				got = append(got, s)
			}
			sort.Strings(got)
			if slices.Equal(got, names) {
				return true
			}
		}
	}
	return false
}

// dashCoverage is what the dashboard shows, for the check that it shows
// what the issue asks for.
type dashCoverage struct {
	slidegate map[string]bool // "metric stat" and "metric dim=value"
	lambda    map[string]bool // "metric function"
	alarms    map[string]bool // logical ids
	rules     map[string]bool // logical ids
}

// dashboardErrors checks a dashboard body (the unresolved !Sub string)
// against the template and the run: every widget well formed, every
// slidegate metric fed by the run's records with its exact dimension set
// and values, every AWS/Lambda metric one Lambda publishes for one of the
// template's functions, every expression naming only the widget's ids,
// every alarm and every rule of the template shown, and everything the
// operators' issue lists present.
func dashboardErrors(tpl tplTemplate, body string, run dashRun) []error {
	resolved, errs := dashResolve(tpl, body)
	var doc struct {
		Widgets []struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		} `json:"widgets"`
	}
	dec := json.NewDecoder(strings.NewReader(resolved))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return append(errs, fmt.Errorf("dashboard body is not JSON: %w", err))
	}
	if len(doc.Widgets) == 0 {
		return append(errs, errors.New("dashboard has no widgets"))
	}
	cov := dashCoverage{slidegate: map[string]bool{}, lambda: map[string]bool{}, alarms: map[string]bool{}, rules: map[string]bool{}}
	functions := map[string]string{}
	for _, id := range tplFunctionIDs {
		functions["fake-"+id] = id
	}
	ruleNames := map[string]string{}
	for _, r := range tplResources(tpl.root, "AWS::CloudWatch::InsightRule") {
		ruleNames["rule-"+r.id] = r.id
	}
	alarmARNs := map[string]string{}
	for _, a := range tplResources(tpl.root, "AWS::CloudWatch::Alarm") {
		alarmARNs[dashAlarmARN(a.id)] = a.id
	}
	for i, w := range doc.Widgets {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("widget %d (%v): %s", i, w.Properties["title"], fmt.Sprintf(format, args...)))
		}
		switch w.Type {
		case "text":
			if s, _ := w.Properties["markdown"].(string); s == "" {
				bad("text widget without markdown")
			}
		case "alarm":
			alarms, _ := w.Properties["alarms"].([]any)
			for _, a := range alarms {
				s, _ := a.(string)
				if id, ok := alarmARNs[s]; ok {
					cov.alarms[id] = true
				} else {
					bad("alarm %q is none of the template's alarms", s)
				}
			}
		case "metric":
			if w.Properties["region"] != dashRegion {
				bad("region %v, want ${AWS::Region}", w.Properties["region"])
			}
			if rule, ok := w.Properties["insightRule"].(map[string]any); ok {
				name, _ := rule["ruleName"].(string)
				id, known := ruleNames[name]
				if !known {
					bad("insightRule %q is none of the template's Contributor Insights rules", name)
				}
				cov.rules[id] = true
				if rule["orderBy"] != "Sum" || rule["maxContributorCount"] == nil {
					bad("insightRule wants maxContributorCount and orderBy Sum: %v", rule)
				}
				continue
			}
			errs = append(errs, dashMetricWidgetErrors(i, w.Properties, run, functions, cov)...)
		default:
			bad("unknown widget type %q", w.Type)
		}
	}
	for _, a := range tplResources(tpl.root, "AWS::CloudWatch::Alarm") {
		if !cov.alarms[a.id] {
			errs = append(errs, fmt.Errorf("alarm %s is not on the dashboard", a.id))
		}
	}
	for _, r := range tplResources(tpl.root, "AWS::CloudWatch::InsightRule") {
		if !cov.rules[r.id] {
			errs = append(errs, fmt.Errorf("Contributor Insights rule %s is not on the dashboard", r.id))
		}
	}
	var want []string
	for _, o := range []string{"allowed", "denied", "degraded", "rejected", "shadow-denied", "blocked", "unlimited"} {
		want = append(want, "Decisions outcome="+o)
	}
	for _, tier := range []string{"anonymous", "user", "org"} {
		want = append(want, "Decisions tier="+tier)
	}
	want = append(want, "DecisionLatency p50", "DecisionLatency p99", "RedisLatency p50", "RedisLatency p99",
		"BreakerOpen Maximum", "BreakerStateChanges Sum")
	for _, k := range want {
		if !cov.slidegate[k] {
			errs = append(errs, fmt.Errorf("the dashboard does not show %s", k))
		}
	}
	for _, m := range []string{"Duration", "Errors", "ConcurrentExecutions"} {
		for _, id := range tplFunctionIDs {
			if !cov.lambda[m+" "+id] {
				errs = append(errs, fmt.Errorf("the dashboard does not show AWS/Lambda %s of %s", m, id))
			}
		}
	}
	return errs
}

var dashIdentifier = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// dashMetricWidgetErrors checks one metric widget's "metrics" array.
func dashMetricWidgetErrors(i int, props map[string]any, run dashRun, functions map[string]string, cov dashCoverage) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("widget %d (%v): %s", i, props["title"], fmt.Sprintf(format, args...)))
	}
	entries, _ := props["metrics"].([]any)
	if len(entries) == 0 {
		bad("metric widget without metrics or insightRule")
		return errs
	}
	widgetStat, _ := props["stat"].(string)
	ids := map[string]bool{}
	var expressions []string
	for _, raw := range entries {
		entry, _ := raw.([]any)
		if len(entry) == 0 {
			bad("metrics entry %v is not a non-empty array", raw)
			continue
		}
		opts, _ := entry[len(entry)-1].(map[string]any)
		if opts != nil {
			entry = entry[:len(entry)-1]
			if id, ok := opts["id"].(string); ok {
				if ids[id] {
					bad("id %q used twice", id)
				}
				ids[id] = true
			}
		}
		if expr, ok := opts["expression"].(string); ok {
			if len(entry) != 0 {
				bad("expression %q with metric fields %v", expr, entry)
			}
			expressions = append(expressions, expr)
			continue
		}
		parts := make([]string, len(entry))
		for j, p := range entry {
			s, ok := p.(string)
			if !ok || s == "." {
				bad("metrics entry %v: want namespace, name and dimension pairs as strings (no \".\" shorthand)", raw)
				parts = nil
				break
			}
			parts[j] = s
		}
		if len(parts) < 2 || len(parts)%2 != 0 {
			if parts != nil {
				bad("metrics entry %v: want namespace, name and name/value pairs", raw)
			}
			continue
		}
		namespace, metric := parts[0], parts[1]
		dims := map[string]string{}
		for j := 2; j < len(parts); j += 2 {
			dims[parts[j]] = parts[j+1]
		}
		stat, _ := opts["stat"].(string)
		if stat == "" {
			stat = widgetStat
		}
		if stat == "" {
			stat = "Average"
		}
		if !dashStat.MatchString(stat) {
			bad("%s/%s: statistic %q", namespace, metric, stat)
		}
		switch namespace {
		case "slidegate":
			if err := dashRecordsFeed(run.records, namespace, metric, dims); err != nil {
				bad("%v", err)
				continue
			}
			cov.slidegate[metric+" "+stat] = true
			for k, v := range dims {
				cov.slidegate[metric+" "+k+"="+v] = true
			}
		case "AWS/Lambda":
			fn, ok := functions[dims["FunctionName"]]
			if !slices.Contains(dashLambdaMetrics, metric) || len(dims) != 1 || !ok {
				bad("AWS/Lambda %s %v: want one of %v by FunctionName of one of the template's functions", metric, dims, dashLambdaMetrics)
				continue
			}
			cov.lambda[metric+" "+fn] = true
		default:
			bad("namespace %q: the dashboard reads slidegate's EMF metrics and AWS/Lambda only", namespace)
		}
	}
	// An expression names ids of this widget (lower case first), functions
	// (upper case) and, in quotes, METRICS prefixes.
	for _, expr := range expressions {
		quoted := regexp.MustCompile(`"[^"]*"`)
		for _, q := range quoted.FindAllString(expr, -1) {
			prefix := strings.Trim(q, `"`)
			if !slices.ContainsFunc(slices.Collect(maps.Keys(ids)), func(id string) bool { return strings.HasPrefix(id, prefix) }) {
				bad("expression %q: METRICS(%q) matches no id", expr, prefix)
			}
		}
		for _, tok := range dashIdentifier.FindAllString(quoted.ReplaceAllString(expr, ""), -1) {
			if tok[0] >= 'a' && tok[0] <= 'z' && !ids[tok] {
				bad("expression %q names %q, no id of this widget", expr, tok)
			}
		}
	}
	return errs
}

// dashPath reads a Contributor Insights JSON path ("$.a.b") from a line.
func dashPath(line map[string]any, path string) (any, bool) {
	rest, ok := strings.CutPrefix(path, "$.")
	if !ok || rest == "" {
		return nil, false
	}
	var cur any = line
	for _, k := range strings.Split(rest, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// dashRule is a Contributor Insights rule body.
type dashRule struct {
	Schema struct {
		Name    string `json:"Name"`
		Version int    `json:"Version"`
	} `json:"Schema"`
	LogGroupNames []string `json:"LogGroupNames"`
	LogFormat     string   `json:"LogFormat"`
	Contribution  struct {
		Keys    []string         `json:"Keys"`
		Filters []map[string]any `json:"Filters"`
	} `json:"Contribution"`
	AggregateOn string `json:"AggregateOn"`
}

// dashFilterMatches reports whether a line passes one filter; an operator
// this test does not implement is an error.
func dashFilterMatches(line map[string]any, f map[string]any) (bool, error) {
	path, _ := f["Match"].(string)
	v, present := dashPath(line, path)
	for op, arg := range f {
		switch op {
		case "Match":
		case "In":
			values, _ := arg.([]any)
			if !present || !slices.ContainsFunc(values, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }) {
				return false, nil
			}
		case "IsPresent":
			if b, _ := arg.(bool); b != present {
				return false, nil
			}
		default:
			return false, fmt.Errorf("filter operator %q is not one this test evaluates", op)
		}
	}
	return true, nil
}

// insightRuleErrors checks one rule body (the unresolved !Sub string): the
// schema, JSON, Count, the functions' log groups; some log line of the run
// passes its filters, every such line holds every key as a non-empty
// value, and no EMF record passes them (it would be counted and billed).
func insightRuleErrors(tpl tplTemplate, body string, run dashRun) []error {
	resolved, errs := dashResolve(tpl, body)
	var rule dashRule
	dec := json.NewDecoder(strings.NewReader(resolved))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rule); err != nil {
		return append(errs, fmt.Errorf("rule body is not a rule: %w", err))
	}
	if rule.Schema.Name != "CloudWatchLogRule" || rule.Schema.Version != 1 {
		errs = append(errs, fmt.Errorf("Schema %+v, want CloudWatchLogRule version 1", rule.Schema))
	}
	if rule.LogFormat != "JSON" {
		errs = append(errs, fmt.Errorf("LogFormat %q: the functions write JSON lines", rule.LogFormat))
	}
	if rule.AggregateOn != "Count" {
		errs = append(errs, fmt.Errorf("AggregateOn %q, want Count (lines)", rule.AggregateOn))
	}
	var groups []string
	for _, id := range tplFunctionIDs {
		groups = append(groups, "/aws/lambda/fake-"+id)
	}
	if got := slices.Sorted(slices.Values(rule.LogGroupNames)); !slices.Equal(got, slices.Sorted(slices.Values(groups))) {
		errs = append(errs, fmt.Errorf("LogGroupNames %v, want the functions' log groups %v", rule.LogGroupNames, groups))
	}
	if n := len(rule.Contribution.Keys); n < 1 || n > 4 {
		errs = append(errs, fmt.Errorf("%d keys, want 1 to 4", n))
	}
	if len(rule.Contribution.Filters) == 0 {
		errs = append(errs, errors.New("no filter: the rule would count every line, EMF records included"))
	}
	passes := func(line map[string]any) bool {
		for _, f := range rule.Contribution.Filters {
			ok, err := dashFilterMatches(line, f)
			if err != nil {
				errs = append(errs, err)
				return false
			}
			if !ok {
				return false
			}
		}
		return true
	}
	matched := 0
	for _, line := range run.lines {
		if !passes(line) {
			continue
		}
		matched++
		for _, k := range rule.Contribution.Keys {
			v, ok := dashPath(line, k)
			if s := fmt.Sprint(v); !ok || v == nil || s == "" {
				errs = append(errs, fmt.Errorf("key %s is not in a line the rule counts: %v", k, line))
			}
		}
	}
	if matched == 0 {
		errs = append(errs, fmt.Errorf("no log line of a real run passes the filters %v", rule.Contribution.Filters))
	}
	for _, r := range run.records {
		if passes(r) {
			errs = append(errs, fmt.Errorf("an EMF record passes the filters %v: %v", rule.Contribution.Filters, r))
			break
		}
	}
	return errs
}

// dashBodies are the template's dashboard body and rule bodies, by
// logical id, unresolved.
func dashBodies(t *testing.T, tpl tplTemplate) (dashboard string, rules map[string]string) {
	t.Helper()
	boards := tplResources(tpl.root, "AWS::CloudWatch::Dashboard")
	if len(boards) != 1 {
		t.Fatalf("want one AWS::CloudWatch::Dashboard, got %d", len(boards))
	}
	props := yamlGet(boards[0].node, "Properties")
	if name, ok := yamlRef(yamlGet(props, "DashboardName")); !ok || name != "AWS::StackName" {
		t.Errorf("DashboardName: want !Ref AWS::StackName (one dashboard per stack, named after it), got %s", yamlString(yamlGet(props, "DashboardName")))
	}
	dashboard = dashSub(t, yamlGet(props, "DashboardBody"), "DashboardBody")
	rules = map[string]string{}
	for _, r := range tplResources(tpl.root, "AWS::CloudWatch::InsightRule") {
		p := yamlGet(r.node, "Properties")
		rules[r.id] = dashSub(t, yamlGet(p, "RuleBody"), r.id+" RuleBody")
		if s := yamlScalar(yamlGet(p, "RuleState")); s != "ENABLED" {
			t.Errorf("%s: RuleState %q, want ENABLED", r.id, s)
		}
		if name := dashSub(t, yamlGet(p, "RuleName"), r.id+" RuleName"); !strings.HasPrefix(name, "${AWS::StackName}-") {
			t.Errorf("%s: RuleName %q, want it named after the stack", r.id, name)
		}
	}
	if len(rules) != 6 {
		t.Errorf("%d Contributor Insights rules, want 6 (identities, routes, tiers denied; bad credentials; in-flight denials; callers live controls changed)", len(rules))
	}
	return dashboard, rules
}

// TestObservabilityDashboardAndRules: the template's dashboard reads only
// metrics, dimension sets and dimension values that the functions' EMF
// records really carry (and Lambda's own metrics of the template's two
// functions), shows every alarm and every Contributor Insights rule; each
// rule watches the functions' log groups and counts decision lines by
// fields those lines really hold. The functions log to Lambda's default
// groups, so the rules' /aws/lambda/<function> names are theirs. Each
// mutation of the template's text (a misspelt metric, a dimension the code
// does not write, a log field nested or renamed, a filter that lets the
// EMF records in...) makes the check fail.
func TestObservabilityDashboardAndRules(t *testing.T) {
	tpl := tplLoad(t)
	dashboard, rules := dashBodies(t, tpl)
	run := dashRealRun(t)

	t.Run("log groups are Lambda's defaults", func(t *testing.T) {
		global := yamlGet(yamlGet(yamlGet(tpl.root, "Globals"), "Function"), "LoggingConfig")
		if yamlScalar(yamlGet(global, "LogFormat")) != "JSON" || yamlGet(global, "LogGroup") != nil {
			t.Errorf("Globals LoggingConfig: want LogFormat JSON and no LogGroup (the rules watch /aws/lambda/<function>): %s", yamlString(global))
		}
		for _, id := range tplFunctionIDs {
			if lc := yamlGet(yamlGet(yamlGet(yamlGet(tpl.root, "Resources"), id), "Properties"), "LoggingConfig"); lc != nil {
				t.Errorf("%s has its own LoggingConfig; the rules assume the global one: %s", id, yamlString(lc))
			}
		}
	})
	t.Run("dashboard", func(t *testing.T) {
		for _, err := range dashboardErrors(tpl, dashboard, run) {
			t.Error(err)
		}
	})
	for id, body := range rules {
		t.Run("rule "+id, func(t *testing.T) {
			for _, err := range insightRuleErrors(tpl, body, run) {
				t.Error(err)
			}
		})
	}

	mutations := []struct {
		name     string
		resource string // "Dashboard" or a rule's logical id
		old, new string
	}{
		{"misspelt metric", "Dashboard", `"RedisLatency", {"id": "redis_p50"`, `"RedisLatencyMs", {"id": "redis_p50"`},
		{"dimension set never published", "Dashboard", `"RedisLatency", {"id": "redis_p99"`, `"RedisLatency", "outcome", "denied", {"id": "redis_p99"`},
		{"wrong dimension name", "Dashboard", `"Decisions", "outcome", "degraded", {"id": "degraded", "label"`, `"Decisions", "result", "degraded", {"id": "degraded", "label"`},
		{"dimension value never written", "Dashboard", `"tier", "org", "outcome", "denied"`, `"tier", "enterprise", "outcome", "denied"`},
		{"wrong namespace", "Dashboard", `["slidegate", "BreakerOpen", {"id": "open_any"`, `["Slidegate", "BreakerOpen", {"id": "open_any"`},
		{"expression names no id", "Dashboard", `"denied/PERIOD(denied)"`, `"denid/PERIOD(denied)"`},
		{"Lambda metric of no function of the stack", "Dashboard", `"FunctionName", "${ApiFunction}", {"id": "api_concurrency"`, `"FunctionName", "${AWS::StackName}-api", {"id": "api_concurrency"`},
		{"an alarm left out", "Dashboard", `, "${RedisLatencyAlarm.Arn}"`, ``},
		{"a rule's widget misnamed", "Dashboard", `"${BadCredentialsRule.RuleName}"`, `"${AWS::StackName}-bad-credential"`},
		{"key renamed", "DeniedIdentitiesRule", `"$.identity", "$.tier"`, `"$.identityHash", "$.tier"`},
		{"key nested under message", "DeniedRoutesRule", `"$.route"`, `"$.message.route"`},
		{"no message filter: EMF records counted", "DeniedTiersRule", `{"Match": "$.msg", "In": ["rate limit decision"]}, `, ``},
		{"filter value never written", "BadCredentialsRule", `["unauthorized credential"]`, `["unauthorised credential"]`},
		{"log group of no function", "DeniedRoutesRule", `"/aws/lambda/${ApiFunction}"`, `"/aws/lambda/${AWS::StackName}-ApiFunction"`},
		{"log format", "DeniedIdentitiesRule", `"LogFormat": "JSON"`, `"LogFormat": "CLF"`},
		{"control value never written", "Dashboard", `"control", "scaled", {"id": "control_scaled"`, `"control", "scale", {"id": "control_scaled"`},
		{"control filter value never written", "ControlledCallersRule", `"blocked-by-control", "exempt", "scaled"]`, `"blocked", "exempted", "scale"]`},
	}
	for _, m := range mutations {
		t.Run("mutation: "+m.name, func(t *testing.T) {
			body := dashboard
			if m.resource != "Dashboard" {
				body = rules[m.resource]
			}
			if !strings.Contains(body, m.old) {
				t.Fatalf("%s no longer holds %s: update the mutation", m.resource, m.old)
			}
			mutated := strings.Replace(body, m.old, m.new, 1)
			var errs []error
			if m.resource == "Dashboard" {
				errs = dashboardErrors(tpl, mutated, run)
			} else {
				errs = insightRuleErrors(tpl, mutated, run)
			}
			if len(errs) == 0 {
				t.Fatalf("the check passed the mutated %s", m.resource)
			}
			t.Logf("caught: %v", errs[0])
		})
	}
}
