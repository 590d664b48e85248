package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/slidegate/slidegate/internal/apihandler"
	"github.com/slidegate/slidegate/internal/authorizer"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// The observability tests run real decisions (a real redis-server, the
// real authorizer and API handlers, real aws-lambda-go event payloads)
// and read what a function writes to standard output: JSON log lines and
// CloudWatch Embedded Metric Format (EMF) records, interleaved as in
// Lambda.

// obsFunction is one function's runtime and handlers, built in-process as
// the functions' mains build them, with standard output captured and the
// log budget's clock in the test's hands.
type obsFunction struct {
	stdout     *testkit.Buffer
	clock      *testkit.Clock
	authorizer *authorizer.Handler
	api        *apihandler.LambdaHandler
	invocation int
}

// obsStart builds a function on env (LOG_LEVEL included), logging and
// publishing metrics to one captured standard output.
func obsStart(t *testing.T, env map[string]string) *obsFunction {
	t.Helper()
	getenv := func(k string) string { return env[k] }
	f := &obsFunction{stdout: &testkit.Buffer{}, clock: testkit.NewClock(time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC))}
	ctx := context.Background()
	logger := instance.NewLogger(ctx, f.stdout, getenv)
	rt, err := instance.NewRuntime(ctx, getenv, instance.Options{
		Logger:              logger,
		Metrics:             f.stdout,
		DecisionLogSampling: observe.LogSampling{Now: f.clock.Now},
	})
	if err != nil {
		t.Fatalf("new runtime: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	f.authorizer = authorizer.New(rt)
	f.api = apihandler.NewLambdaHandler(apihandler.New(rt, apihandler.Options{Logger: rt.Logger()}), rt.Logger())
	return f
}

// obsOutput is what one invocation wrote: its EMF records and its log
// lines, each parsed.
type obsOutput struct {
	metrics []map[string]any
	logs    []map[string]any
}

// decisionLogs are the decision lines among the logs.
func (o obsOutput) decisionLogs() []map[string]any {
	var out []map[string]any
	for _, l := range o.logs {
		if l["msg"] == observe.DecisionMessage {
			out = append(out, l)
		}
	}
	return out
}

// invoke runs one invocation of the authorizer ("authorizer") or the API
// function ("api") on payload, in a Lambda context with its own request
// id, and returns what it wrote. Every line must be JSON.
func (f *obsFunction) invoke(t *testing.T, function string, payload []byte) (obsOutput, string) {
	t.Helper()
	f.invocation++
	lambdaID := fmt.Sprintf("0b7e4f3a-0000-4000-8000-%012d", f.invocation)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: lambdaID})
	before := len(f.stdout.String())
	switch function {
	case "authorizer":
		_, _ = f.authorizer.Invoke(ctx, payload) // answers are other tests' business
	case "api":
		if _, err := f.api.Invoke(ctx, payload); err != nil {
			t.Fatalf("API function returned an error: %v", err)
		}
	default:
		t.Fatalf("no function %q", function)
	}
	return obsParse(t, f.stdout.String()[before:]), lambdaID
}

// obsParse splits standard output into EMF records and log lines; a line
// that is not a JSON object fails the test.
func obsParse(t *testing.T, out string) obsOutput {
	t.Helper()
	var o obsOutput
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		m, err := obsJSON(line)
		if err != nil {
			t.Fatalf("standard output line is not a JSON object: %v: %s", err, line)
		}
		if _, ok := m["_aws"]; ok {
			if errs := validateEMF(m, time.Now()); len(errs) > 0 {
				t.Fatalf("EMF record breaks the specification: %v\n%s", errors.Join(errs...), line)
			}
			o.metrics = append(o.metrics, m)
		} else {
			o.logs = append(o.logs, m)
		}
	}
	return o
}

// obsJSON parses one line, numbers as json.Number.
func obsJSON(line string) (map[string]any, error) {
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("data after the object")
	}
	return m, nil
}

// cloudWatchUnits are the units CloudWatch accepts (EMF MetricDefinition
// Unit, the same list as PutMetricData's StandardUnit).
var cloudWatchUnits = []string{
	"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
	"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
	"Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second",
	"Bits/Second", "Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second",
	"Count/Second", "None",
}

// validateEMF checks one record (parsed with json.Number) against the
// Embedded Metric Format specification: the root's "_aws" metadata object
// with an integer millisecond Timestamp (within a day of now) and a
// non-empty CloudWatchMetrics array of directives; each directive with a
// Namespace of 1 to 1024 characters that CloudWatch accepts, a Dimensions
// array of dimension sets of at most 30 names, each naming a root member
// whose value is a string of 1 to 1024 characters, and a Metrics array of
// 1 to 100 definitions {Name, Unit (CloudWatch's list), StorageResolution
// (1 or 60)}, each naming a root member that is a number or an array of at
// most 100 numbers; objects defined by the specification hold no other
// members.
func validateEMF(root map[string]any, now time.Time) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		return []error{errors.New("_aws is not an object")}
	}
	for k := range aws {
		if k != "Timestamp" && k != "CloudWatchMetrics" && k != "LogGroupName" && k != "LogStreamName" {
			bad("_aws has an unknown member %q", k)
		}
	}
	ts, ok := aws["Timestamp"].(json.Number)
	if !ok {
		bad("_aws.Timestamp is not a number: %v", aws["Timestamp"])
	} else if ms, err := ts.Int64(); err != nil {
		bad("_aws.Timestamp %s is not an integer", ts)
	} else if d := now.Sub(time.UnixMilli(ms)); d > 24*time.Hour || d < -24*time.Hour {
		bad("_aws.Timestamp %d is not milliseconds near now", ms)
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		bad("_aws.CloudWatchMetrics is not a non-empty array")
	}
	for i, raw := range directives {
		dir, ok := raw.(map[string]any)
		if !ok {
			bad("directive %d is not an object", i)
			continue
		}
		for k := range dir {
			if k != "Namespace" && k != "Dimensions" && k != "Metrics" {
				bad("directive %d has an unknown member %q", i, k)
			}
		}
		ns, ok := dir["Namespace"].(string)
		if !ok || len(ns) < 1 || len(ns) > 1024 || strings.HasPrefix(ns, "AWS/") ||
			strings.ContainsFunc(ns, func(r rune) bool {
				return !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_/#:", r)
			}) {
			bad("directive %d: Namespace %v", i, dir["Namespace"])
		}
		sets, ok := dir["Dimensions"].([]any)
		if !ok {
			bad("directive %d: Dimensions is not an array", i)
		}
		for j, rawSet := range sets {
			set, ok := rawSet.([]any)
			if !ok || len(set) > 30 {
				bad("directive %d: dimension set %d is not an array of at most 30 names: %v", i, j, rawSet)
				continue
			}
			for _, rawName := range set {
				name, ok := rawName.(string)
				if !ok {
					bad("directive %d: dimension name %v is not a string", i, rawName)
					continue
				}
				v, ok := root[name].(string)
				if !ok || len(v) < 1 || len(v) > 1024 {
					bad("directive %d: dimension %q has no string value of 1 to 1024 characters in the root: %v", i, name, root[name])
				}
			}
		}
		metrics, ok := dir["Metrics"].([]any)
		if !ok || len(metrics) == 0 || len(metrics) > 100 {
			bad("directive %d: Metrics is not an array of 1 to 100 definitions", i)
		}
		for _, rawMetric := range metrics {
			m, ok := rawMetric.(map[string]any)
			if !ok {
				bad("directive %d: metric definition %v is not an object", i, rawMetric)
				continue
			}
			for k := range m {
				if k != "Name" && k != "Unit" && k != "StorageResolution" {
					bad("directive %d: metric definition has an unknown member %q", i, k)
				}
			}
			name, ok := m["Name"].(string)
			if !ok || len(name) < 1 || len(name) > 1024 {
				bad("directive %d: metric Name %v", i, m["Name"])
				continue
			}
			if u, present := m["Unit"]; present {
				if s, ok := u.(string); !ok || !slices.Contains(cloudWatchUnits, s) {
					bad("metric %s: Unit %v is not a CloudWatch unit", name, u)
				}
			}
			if r, present := m["StorageResolution"]; present && r != json.Number("1") && r != json.Number("60") {
				bad("metric %s: StorageResolution %v", name, r)
			}
			if !emfNumeric(root[name]) {
				bad("metric %s: root value %v is not a number or an array of at most 100 numbers", name, root[name])
			}
		}
	}
	return errs
}

func emfNumeric(v any) bool {
	isNumber := func(x any) bool {
		n, ok := x.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	if arr, ok := v.([]any); ok {
		if len(arr) > 100 {
			return false
		}
		for _, x := range arr {
			if !isNumber(x) {
				return false
			}
		}
		return true
	}
	return isNumber(v)
}

// TestObservabilityEMFValidatorRejectsBrokenRecords: the validator the
// other tests rely on catches each kind of mistake.
func TestObservabilityEMFValidatorRejectsBrokenRecords(t *testing.T) {
	good := `{"_aws":{"Timestamp":%d,"CloudWatchMetrics":[{"Namespace":"slidegate","Dimensions":[["tier","outcome"],["outcome"]],"Metrics":[{"Name":"Decisions","Unit":"Count"}]},{"Namespace":"slidegate","Dimensions":[[]],"Metrics":[{"Name":"RedisLatency","Unit":"Milliseconds"}]}]},"tier":"user","outcome":"allowed","Decisions":1,"RedisLatency":[0.5,0.7]}`
	now := time.Now()
	ms := now.UnixMilli()
	cases := []struct {
		name string
		line string
		ok   bool
	}{
		{"a good record", fmt.Sprintf(good, ms), true},
		{"no _aws", `{"Decisions":1}`, false},
		{"Timestamp in seconds", fmt.Sprintf(good, ms/1000), false},
		{"Timestamp not an integer", strings.Replace(fmt.Sprintf(good, ms), fmt.Sprint(ms), fmt.Sprint(ms)+".5", 1), false},
		{"empty namespace", strings.Replace(fmt.Sprintf(good, ms), `"Namespace":"slidegate"`, `"Namespace":""`, 1), false},
		{"dimension without a value", strings.Replace(fmt.Sprintf(good, ms), `"tier":"user",`, ``, 1), false},
		{"dimension value not a string", strings.Replace(fmt.Sprintf(good, ms), `"tier":"user"`, `"tier":3`, 1), false},
		{"metric without a value", strings.Replace(fmt.Sprintf(good, ms), `,"Decisions":1`, ``, 1), false},
		{"metric value a string", strings.Replace(fmt.Sprintf(good, ms), `"Decisions":1`, `"Decisions":"1"`, 1), false},
		{"unknown unit", strings.Replace(fmt.Sprintf(good, ms), `"Unit":"Count"`, `"Unit":"Requests"`, 1), false},
		{"extra member in a directive", strings.Replace(fmt.Sprintf(good, ms), `"Namespace":"slidegate",`, `"Namespace":"slidegate","Extra":1,`, 1), false},
		{"31 dimensions in a set", strings.Replace(fmt.Sprintf(good, ms), `["outcome"]]`, `["outcome"`+strings.Repeat(`,"outcome"`, 30)+`]]`, 1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := obsJSON(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			errs := validateEMF(m, now)
			if (len(errs) == 0) != tc.ok {
				t.Fatalf("valid=%v, want %v: %v", len(errs) == 0, tc.ok, errs)
			}
		})
	}
}

// Test credentials and planted values. The secrets must never appear in
// any output; the IPs are distinctive so that a search for them is
// meaningful.
const (
	obsJWTSecret  = "obs-test-hs256-secret-4d1c8e-0123456789"
	obsKnownKey   = "obs-known-api-key-7Qe9LpX2"
	obsUnknownKey = "obs-unknown-api-key-Vb3Nw8Kd"
	obsPassword   = "correct-horse-battery-staple-91"
	obsSourceIP   = "203.0.113.77"
	obsSubject    = "obs-user-subject-5521"
	obsQueryToken = "obs-query-token-Hh62Zp"
	// obsPathSecret is a reset token in an HTTP API request's path.
	obsPathSecret = "obs-path-secret-Wq81Lm"
)

// obsEnv is the environment of the functions under test: small limits so
// that denials come quickly, one known key, HS256 tokens, the default
// fail-closed /auth/* routes.
func obsEnv(redisURL string, overrides map[string]string) map[string]string {
	env := map[string]string{
		"REDIS_URL":            redisURL,
		"REDIS_TIMEOUT":        "100ms",
		"RATE_LIMIT_ANONYMOUS": "2/1m",
		"RATE_LIMIT_USER":      "4/1m",
		"RATE_LIMIT_ORG":       "5/1m",
		"API_KEY_HASHES":       identity.KeyHash(obsKnownKey),
		"JWT_ISSUER":           azIssuer,
		"JWT_AUDIENCE":         azAudience,
		"JWT_HS256_SECRET":     obsJWTSecret,
	}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// obsRESTAuthorizerEvent is a REST REQUEST authorizer event with its own
// API Gateway request id.
func obsRESTAuthorizerEvent(t *testing.T, r azRequest, requestID string) []byte {
	t.Helper()
	var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
	if err := json.Unmarshal(azRESTEvent(t, r), &ev); err != nil {
		t.Fatal(err)
	}
	ev.RequestContext.RequestID = requestID
	return apitest.JSON(t, ev)
}

// obsHTTPAuthorizerEvent is an HTTP API authorizer event with its own
// request id.
func obsHTTPAuthorizerEvent(t *testing.T, r azRequest, requestID string) []byte {
	t.Helper()
	var ev events.APIGatewayV2CustomAuthorizerV2Request
	if err := json.Unmarshal(azHTTPEvent(t, r), &ev); err != nil {
		t.Fatal(err)
	}
	ev.RequestContext.RequestID = requestID
	return apitest.JSON(t, ev)
}

// obsAPIEvent is a REST proxy event for method and path from ip.
func obsAPIEvent(t *testing.T, method, path, ip, requestID string, headers map[string]string, body string) []byte {
	t.Helper()
	return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
		e.HTTPMethod, e.Path, e.Resource = method, path, path
		e.RequestContext.HTTPMethod, e.RequestContext.Path = method, "/prod"+path
		e.RequestContext.Identity.SourceIP = ip
		e.RequestContext.RequestID = requestID
		apitest.SetRESTHeader(e, "X-Forwarded-For", ip)
		for k, v := range headers {
			apitest.SetRESTHeader(e, k, v)
		}
		e.Body = body
	})
}

// obsHTTPAPIEvent is an HTTP API (payload 2.0) proxy event.
func obsHTTPAPIEvent(t *testing.T, method, path, ip, requestID string, headers map[string]string, body string) []byte {
	t.Helper()
	return apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
		e.RouteKey, e.RawPath = method+" "+path, path
		e.RequestContext.HTTP.Method, e.RequestContext.HTTP.Path = method, path
		e.RequestContext.HTTP.SourceIP = ip
		e.RequestContext.RequestID = requestID
		e.Headers["x-forwarded-for"] = ip
		for k, v := range headers {
			e.Headers[strings.ToLower(k)] = v
		}
		e.Body = body
	})
}

// TestObservabilityRecordsOfRealDecisions: every invocation that decides
// writes exactly one valid EMF record naming its tier and outcome, with
// RedisLatency exactly when Redis was asked (whether it answered or failed)
// and the request ids of API Gateway and Lambda; an invocation that decides
// nothing (the API function reusing the authorizer's decision) writes
// none; a quota call writes the record of its own limit's decision. At the default level, allowed decisions are not logged
// and every other outcome is, at its level, with the route, the hashed
// identity, the limit and the request ids. After Redis stops: degraded
// (fail-open), rejected (fail-closed), and the circuit breaker's opening.
func TestObservabilityRecordsOfRealDecisions(t *testing.T) {
	srv := redistest.StartServer(t)
	fn := obsStart(t, obsEnv(srv.URL(), nil))
	token := azToken(t, obsJWTSecret, obsSubject)
	rest := func(ip, method, path string, headers map[string]string) func(*testing.T, string) []byte {
		return func(t *testing.T, id string) []byte {
			return obsRESTAuthorizerEvent(t, azRequest{method: method, path: path, ip: ip, headers: headers}, id)
		}
	}
	httpAuthorizer := func(ip string) func(*testing.T, string) []byte {
		return func(t *testing.T, id string) []byte {
			return obsHTTPAuthorizerEvent(t, azRequest{ip: ip}, id)
		}
	}
	api := func(method, path, ip string, headers map[string]string, body string) func(*testing.T, string) []byte {
		return func(t *testing.T, id string) []byte { return obsAPIEvent(t, method, path, ip, id, headers, body) }
	}
	httpAPI := func(method, path, ip string, headers map[string]string, body string) func(*testing.T, string) []byte {
		return func(t *testing.T, id string) []byte { return obsHTTPAPIEvent(t, method, path, ip, id, headers, body) }
	}
	withAuthorizerContext := func(t *testing.T, _ string) []byte {
		return apitest.ReadEvent(t, "api-rest-with-authorizer-context.json")
	}
	stopRedis := func() { srv.Stop() }

	steps := []struct {
		name        string
		before      func() // e.g. stop Redis
		function    string
		event       func(t *testing.T, requestID string) []byte
		wantRecord  bool   // one EMF record, or none
		wantTier    string // of the record and the line
		wantOutcome string
		wantRedis   bool   // RedisLatency in the record
		wantLevel   string // of the decision line; "" for none
		wantReason  string
		wantRoute   string
		wantIP      string // hashed into the line's identity ("" when not anonymous)
	}{
		{"authorizer REST: allowed, not logged at info", nil, "authorizer", rest("198.51.100.31", "GET", "/v1/items", nil),
			true, "anonymous", "allowed", true, "", "", "", ""},
		{"authorizer REST: allowed again", nil, "authorizer", rest("198.51.100.31", "GET", "/v1/items", nil),
			true, "anonymous", "allowed", true, "", "", "", ""},
		{"authorizer REST: denied, Info", nil, "authorizer", rest("198.51.100.31", "GET", "/v1/items", nil),
			true, "anonymous", "denied", true, "INFO", observe.ReasonOverLimit, "GET /v1/items", "198.51.100.31"},
		{"authorizer REST: denied from the deny cache, no Redis time", nil, "authorizer", rest("198.51.100.31", "GET", "/v1/items", nil),
			true, "anonymous", "denied", false, "INFO", observe.ReasonOverLimit, "GET /v1/items", "198.51.100.31"},
		{"authorizer REST: unknown API key, rejected, Warn", nil, "authorizer", rest(obsSourceIP, "GET", "/v1/items", map[string]string{"x-api-key": obsUnknownKey}),
			true, "anonymous", "rejected", true, "WARN", observe.ReasonUnauthorized, "GET /v1/items", obsSourceIP},
		{"authorizer REST: known API key, org, allowed", nil, "authorizer", rest("198.51.100.32", "GET", "/v1/items", map[string]string{"x-api-key": obsKnownKey}),
			true, "org", "allowed", true, "", "", "", ""},
		{"authorizer REST: verified JWT, user, allowed", nil, "authorizer", rest("198.51.100.33", "GET", "/v1/items", map[string]string{"Authorization": "Bearer " + token}),
			true, "user", "allowed", true, "", "", "", ""},
		{"authorizer HTTP API: allowed", nil, "authorizer", httpAuthorizer("198.51.100.34"),
			true, "anonymous", "allowed", true, "", "", "", ""},
		{"API REST: allowed by the function itself", nil, "api", api("GET", "/v1/items", "198.51.100.35", nil, ""),
			true, "anonymous", "allowed", true, "", "", "", ""},
		{"API REST: the authorizer's decision reused, nothing counted", nil, "api", withAuthorizerContext,
			false, "", "", false, "", "", "", ""},
		{"API REST: quota, its own limit counted, the tier only peeked", nil, "api", api("GET", "/v1/quota", "198.51.100.35", nil, ""),
			true, "anonymous", "allowed", true, "", "", "", ""},
		{"API REST: quota with an unknown key, counted and rejected", nil, "api", api("GET", "/v1/quota", "198.51.100.36", map[string]string{"x-api-key": obsUnknownKey}, ""),
			true, "anonymous", "rejected", true, "WARN", observe.ReasonUnauthorized, "GET /v1/quota", "198.51.100.36"},
		{"API HTTP API: login allowed", nil, "api", httpAPI("POST", "/auth/login", "198.51.100.37", map[string]string{"content-type": "application/json"}, `{"username":"a","password":"`+obsPassword+`"}`),
			true, "anonymous", "allowed", true, "", "", "", ""},
		{"Redis stopped: authorizer REST degraded, Warn, with the failed call's Redis time", stopRedis, "authorizer", rest("198.51.100.38", "GET", "/v1/items", nil),
			true, "anonymous", "degraded", true, "WARN", observe.ReasonFallback, "GET /v1/items", "198.51.100.38"},
		{"Redis stopped: authorizer REST login rejected (fail-closed), Error, with Redis time", nil, "authorizer", rest("198.51.100.38", "POST", "/auth/login", nil),
			true, "anonymous", "rejected", true, "ERROR", observe.ReasonUnavailable, "POST /auth/login", "198.51.100.38"},
		{"Redis stopped: API REST login rejected (503), Error, with Redis time", nil, "api", api("POST", "/auth/login", "198.51.100.39", map[string]string{"Content-Type": "application/json"}, `{"username":"a","password":"`+obsPassword+`"}`),
			true, "anonymous", "rejected", true, "ERROR", observe.ReasonUnavailable, "POST /auth/login", "198.51.100.39"},
		{"Redis stopped: API HTTP API degraded, with Redis time", nil, "api", httpAPI("GET", "/v1/items", "198.51.100.40", nil, ""),
			true, "anonymous", "degraded", true, "WARN", observe.ReasonFallback, "GET /v1/items", "198.51.100.40"},
	}
	for i, step := range steps {
		if step.before != nil {
			step.before()
		}
		requestID := fmt.Sprintf("obs-request-%02d", i+1)
		out, lambdaID := fn.invoke(t, step.function, step.event(t, requestID))
		if !step.wantRecord {
			if len(out.metrics) != 0 || len(out.decisionLogs()) != 0 {
				t.Fatalf("%s: want no record and no decision line, got %v and %v", step.name, out.metrics, out.decisionLogs())
			}
			continue
		}
		if len(out.metrics) != 1 {
			t.Fatalf("%s: %d EMF records, want exactly 1: %v", step.name, len(out.metrics), out.metrics)
		}
		m := out.metrics[0]
		_, hasRedis := m["RedisLatency"]
		if m["tier"] != step.wantTier || m["outcome"] != step.wantOutcome || m["Decisions"] != json.Number("1") || hasRedis != step.wantRedis ||
			m["requestId"] != requestID || m["lambdaRequestId"] != lambdaID {
			t.Errorf("%s: record %v, want tier %s outcome %s RedisLatency %v requestId %s lambdaRequestId %s",
				step.name, m, step.wantTier, step.wantOutcome, step.wantRedis, requestID, lambdaID)
		}
		lines := out.decisionLogs()
		if step.wantLevel == "" {
			if len(lines) != 0 {
				t.Errorf("%s: want no decision line at info, got %v", step.name, lines)
			}
			continue
		}
		if len(lines) != 1 {
			t.Fatalf("%s: %d decision lines, want 1: %v", step.name, len(lines), out.logs)
		}
		l := lines[0]
		want := map[string]any{"level": step.wantLevel, "outcome": step.wantOutcome, "reason": step.wantReason, "tier": step.wantTier,
			"route": step.wantRoute, "requestId": requestID, "lambdaRequestId": lambdaID}
		if step.wantIP != "" {
			want["identity"] = identity.Hash(identity.KindIP + step.wantIP)
		}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("%s: line %s = %v, want %v", step.name, k, l[k], v)
			}
		}
		if step.wantOutcome == "denied" {
			if l["limitName"] != "anonymous" || l["limit"] != json.Number("2") || l["remaining"] != json.Number("0") || l["retryAfter"] == nil {
				t.Errorf("%s: denial line without its limit: %v", step.name, l)
			}
		}
	}

	// The breaker opened after repeated failures: the next record says so,
	// once, and so does one log line.
	var opened obsOutput
	for i := range 10 {
		out, _ := fn.invoke(t, "authorizer", obsRESTAuthorizerEvent(t, azRequest{ip: fmt.Sprintf("198.51.100.%d", 50+i)}, "obs-breaker"))
		if len(out.metrics) != 1 {
			t.Fatalf("breaker step %d: %d records", i, len(out.metrics))
		}
		if out.metrics[0]["BreakerStateChanges"] != nil {
			opened = out
			break
		}
	}
	if opened.metrics == nil {
		t.Fatal("no record reported the breaker's change after 10 more failed decisions")
	}
	m := opened.metrics[0]
	if m["BreakerStateChanges"] != json.Number("1") || m["BreakerOpen"] != json.Number("1") || m["breakerState"] != "open" {
		t.Errorf("record of the opening: %v", m)
	}
	var breakerLines int
	for _, l := range opened.logs {
		if l["msg"] == "redis circuit breaker changed state" && l["breakerState"] == "open" && l["level"] == "WARN" {
			breakerLines++
		}
	}
	if breakerLines != 1 {
		t.Errorf("%d log lines about the opening, want 1: %v", breakerLines, opened.logs)
	}
	out, _ := fn.invoke(t, "authorizer", obsRESTAuthorizerEvent(t, azRequest{ip: "198.51.100.70"}, "obs-after"))
	if m := out.metrics[0]; m["BreakerStateChanges"] != nil || m["BreakerOpen"] != json.Number("1") || m["RedisLatency"] != nil {
		t.Errorf("record with the breaker open: %v", m)
	}

	all := obsParse(t, fn.stdout.String())
	// Every degraded line says why Redis could not decide.
	degraded := 0
	for _, l := range all.logs {
		if l["msg"] == "rate limit decision" && l["outcome"] == "degraded" {
			degraded++
			if cause, _ := l["redisError"].(string); cause == "" {
				t.Errorf("degraded line without redisError: %v", l)
			}
		}
	}
	if degraded == 0 {
		t.Errorf("no degraded decision line at all")
	}
	// Every alarm of template.yaml watches a metric these records publish,
	// with its exact dimension set and values.
	tplCheckAlarmsWatch(t, all.metrics)
}

// TestObservabilityUnconfiguredRedisIsDegraded: without REDIS_URL every
// fail-open decision is degraded and counted as such. The client still
// tries Redis (its dial fails at once), so the record carries that
// RedisLatency, as every failed call's does.
func TestObservabilityUnconfiguredRedisIsDegraded(t *testing.T) {
	fn := obsStart(t, obsEnv("", nil))
	out, _ := fn.invoke(t, "authorizer", obsRESTAuthorizerEvent(t, azRequest{ip: "198.51.100.80"}, "obs-unconfigured"))
	if len(out.metrics) != 1 || out.metrics[0]["outcome"] != "degraded" || out.metrics[0]["RedisLatency"] == nil {
		t.Fatalf("records %v, want one degraded record with the failed call's RedisLatency", out.metrics)
	}
	if lines := out.decisionLogs(); len(lines) != 1 || lines[0]["level"] != "WARN" {
		t.Fatalf("decision lines %v, want one Warn line", lines)
	}
}

// TestObservabilityLogLevel: LOG_LEVEL decides which decision lines are
// written, never which records: allowed decisions appear at debug only,
// denials from info down, and a bad value is reported and means info.
func TestObservabilityLogLevel(t *testing.T) {
	srv := redistest.StartServer(t)
	cases := []struct {
		level       string
		wantAllowed bool
		wantDenied  bool
		wantBadConf bool
	}{
		{"", false, true, false},
		{"debug", true, true, false},
		{"INFO", false, true, false},
		{"warn", false, false, false},
		{"verbose", false, true, true},
	}
	for i, tc := range cases {
		t.Run("LOG_LEVEL="+tc.level, func(t *testing.T) {
			fn := obsStart(t, obsEnv(srv.URL(), map[string]string{"LOG_LEVEL": tc.level, "RATE_LIMIT_KEY_PREFIX": fmt.Sprintf("level%d", i)}))
			startup := obsParse(t, fn.stdout.String())
			var badConf bool
			for _, l := range startup.logs {
				if l["msg"] == "bad configuration value" && strings.Contains(fmt.Sprint(l["error"]), `LOG_LEVEL="verbose"`) && strings.Contains(fmt.Sprint(l["error"]), "using info") {
					badConf = true
				}
			}
			if badConf != tc.wantBadConf {
				t.Errorf("configuration error reported: %v, want %v", badConf, tc.wantBadConf)
			}
			var allowedLines, deniedLines, records int
			for range 3 { // limit 2: allowed, allowed, denied
				out, _ := fn.invoke(t, "authorizer", obsRESTAuthorizerEvent(t, azRequest{ip: "198.51.100.90"}, "obs-level"))
				records += len(out.metrics)
				for _, l := range out.decisionLogs() {
					switch l["outcome"] {
					case "allowed":
						allowedLines++
					case "denied":
						deniedLines++
					}
				}
			}
			if records != 3 {
				t.Errorf("%d records for 3 decisions", records)
			}
			if (allowedLines == 2) != tc.wantAllowed || (allowedLines != 0 && allowedLines != 2) {
				t.Errorf("%d allowed lines, want them: %v", allowedLines, tc.wantAllowed)
			}
			if (deniedLines == 1) != tc.wantDenied || deniedLines > 1 {
				t.Errorf("%d denied lines, want one: %v", deniedLines, tc.wantDenied)
			}
		})
	}
}

// TestObservabilityDenialFloodIsSampled: a flood of denials from one
// address writes one record per invocation but only the log budget's
// burst of lines; once the budget refills, the next line says how many
// were dropped. The same holds for a spray of unknown API keys, in its own
// budget.
func TestObservabilityDenialFloodIsSampled(t *testing.T) {
	srv := redistest.StartServer(t)
	fn := obsStart(t, obsEnv(srv.URL(), nil))
	cases := []struct {
		name    string
		outcome string
		event   func(i int) []byte
	}{
		{"denials", "denied", func(int) []byte {
			return obsRESTAuthorizerEvent(t, azRequest{ip: "198.51.100.100"}, "obs-flood")
		}},
		{"unknown keys", "rejected", func(i int) []byte {
			return obsRESTAuthorizerEvent(t, azRequest{ip: "198.51.100.101", headers: map[string]string{"x-api-key": fmt.Sprintf("sprayed-key-%04d", i)}}, "obs-spray")
		}},
	}
	const flood = 300
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var records, lines int
			for i := range flood {
				out, _ := fn.invoke(t, "authorizer", tc.event(i))
				records += len(out.metrics)
				for _, l := range out.decisionLogs() {
					if l["outcome"] == tc.outcome {
						lines++
						if l["suppressed"] != nil {
							t.Fatalf("line %d says %v suppressed before the budget refilled", lines, l["suppressed"])
						}
					}
				}
			}
			if records != flood {
				t.Fatalf("%d records for %d invocations: metrics must never be sampled", records, flood)
			}
			if lines != observe.DefaultLogBurst {
				t.Fatalf("%d %s lines in a flood of %d at one instant, want the burst of %d", lines, tc.outcome, flood, observe.DefaultLogBurst)
			}
			fn.clock.Advance(time.Second)
			out, _ := fn.invoke(t, "authorizer", tc.event(flood))
			got := out.decisionLogs()
			// Of the flood, the first two from the address were allowed.
			wantSuppressed := flood - observe.DefaultLogBurst
			if tc.outcome == "denied" {
				wantSuppressed -= 2
			}
			if len(got) != 1 || got[0]["outcome"] != tc.outcome || got[0]["suppressed"] != json.Number(fmt.Sprint(wantSuppressed)) {
				t.Fatalf("first line after the budget refilled: %v, want %s with suppressed %d", got, tc.outcome, wantSuppressed)
			}
		})
	}
}

// TestObservabilityNeverLogsSecrets runs the real function binaries under
// the Lambda Runtime Interface Emulator at LOG_LEVEL=debug (every line
// there is) and searches everything they print (their log lines, EMF
// records, go-redis's messages through observe.RedisLog, anything a library
// prints) for what the test planted: API keys, bearer JWTs (valid and
// forged), a password in a login body, a token in a query string, the
// user id, and the source IP (also sent as X-Forwarded-For). Redis is
// stopped half-way, so that degraded decisions, fail-closed errors and
// connection failures are logged too. Every line the functions print is
// JSON.
func TestObservabilityNeverLogsSecrets(t *testing.T) {
	srv := redistest.StartServer(t)
	env := obsEnv(srv.URL(), map[string]string{"LOG_LEVEL": "debug"})
	authorizerRIE := lambdatest.StartRIE(t, lambdatest.BuildBootstrap(t, "./functions/authorizer"), env)
	apiRIE := lambdatest.StartRIE(t, lambdatest.BuildBootstrap(t, "./functions/api"), env)

	validJWT := azToken(t, obsJWTSecret, obsSubject)
	forgedJWT := azToken(t, "not-the-secret-at-all", obsSubject)
	headerSets := []map[string]string{
		nil,
		{"x-api-key": obsUnknownKey},
		{"x-api-key": obsKnownKey},
		{"Authorization": "Bearer " + validJWT},
		{"Authorization": "Bearer " + forgedJWT},
		{"Authorization": "Basic " + obsPassword},
	}
	loginBody := `{"username":"obs-user","password":"` + obsPassword + `"}`
	invokeAll := func(phase string) {
		for i, h := range headerSets {
			for _, path := range []string{"/v1/items", "/auth/login"} {
				method := "GET"
				if path == "/auth/login" {
					method = "POST"
				}
				_, _ = authorizerRIE.Invoke(t, obsRESTAuthorizerEvent(t, azRequest{method: method, path: path, ip: obsSourceIP, headers: h}, phase))
				_, _ = authorizerRIE.Invoke(t, obsHTTPAuthorizerEvent(t, azRequest{method: method, path: path, ip: obsSourceIP, headers: h}, phase))
				body := ""
				if method == "POST" {
					body = loginBody
				}
				headers := map[string]string{"Content-Type": "application/json"}
				for k, v := range h {
					headers[k] = v
				}
				if _, err := apiRIE.Invoke(t, obsAPIEvent(t, method, path, obsSourceIP, phase, headers, body)); err != nil {
					t.Fatalf("API function (%s, headers %d): %v", phase, i, err)
				}
				v2 := obsHTTPAPIEvent(t, method, path, obsSourceIP, phase, headers, body)
				v2 = bytes.Replace(v2, []byte(`"rawQueryString":"limit=10"`), []byte(`"rawQueryString":"access_token=`+obsQueryToken+`"`), 1)
				if _, err := apiRIE.Invoke(t, v2); err != nil {
					t.Fatalf("API function (%s, HTTP API, headers %d): %v", phase, i, err)
				}
			}
		}
		// A secret in the path of an HTTP API route: the route key is
		// logged, never the path (allowed at debug, and rejected on a
		// fail-closed route with Redis down).
		secretPath := "/auth/reset/" + obsPathSecret
		withRouteKey := apitest.HTTPAPIEvent(t, func(e *events.APIGatewayV2HTTPRequest) {
			e.RouteKey, e.RawPath = "POST /auth/{proxy+}", secretPath
			e.RequestContext.RouteKey = e.RouteKey
			e.RequestContext.HTTP.Method, e.RequestContext.HTTP.Path = "POST", secretPath
			e.RequestContext.HTTP.SourceIP = obsSourceIP
			e.RequestContext.RequestID = phase
		})
		if _, err := apiRIE.Invoke(t, withRouteKey); err != nil {
			t.Fatalf("API function, secret in the path: %v", err)
		}
		var authz events.APIGatewayV2CustomAuthorizerV2Request
		if err := json.Unmarshal(azHTTPEvent(t, azRequest{method: "POST", path: secretPath, ip: obsSourceIP}), &authz); err != nil {
			t.Fatal(err)
		}
		authz.RouteKey = "POST /auth/{proxy+}"
		authz.RequestContext.RouteKey = authz.RouteKey
		_, _ = authorizerRIE.Invoke(t, apitest.JSON(t, authz))
		// A path the proxy library cannot parse, with a token in the query
		// string: the library's own error would quote the whole URL.
		bad := obsHTTPAPIEvent(t, "GET", "/v1/items%zz", obsSourceIP, phase, nil, "")
		bad = bytes.Replace(bad, []byte(`"rawQueryString":"limit=10"`), []byte(`"rawQueryString":"access_token=`+obsQueryToken+`"`), 1)
		if _, err := apiRIE.Invoke(t, bad); err != nil {
			t.Fatalf("API function, unparseable path: %v", err)
		}
	}
	invokeAll("obs-redis-up")
	srv.Stop()
	invokeAll("obs-redis-down")

	for name, rie := range map[string]*lambdatest.RIE{"authorizer": authorizerRIE, "API": apiRIE} {
		logs := rie.FinalLogs()
		for what, secret := range map[string]string{
			"unknown API key": obsUnknownKey, "known API key": obsKnownKey, "valid JWT": validJWT, "forged JWT": forgedJWT,
			"JWT secret": obsJWTSecret, "password": obsPassword, "query token": obsQueryToken, "user id": obsSubject,
			"source IP": obsSourceIP, "secret in the path": obsPathSecret,
		} {
			if strings.Contains(logs, secret) {
				t.Errorf("the %s function's output holds the %s in clear", name, what)
			}
		}
		var records, decisions, redisLines int
		for _, line := range strings.Split(logs, "\n") {
			if line == "" || obsEmulatorLine(line) {
				continue
			}
			m, err := obsJSON(line)
			if err != nil {
				t.Errorf("the %s function printed a line that is not JSON: %s", name, line)
				continue
			}
			switch {
			case m["_aws"] != nil:
				records++
				if errs := validateEMF(m, time.Now()); len(errs) > 0 {
					t.Errorf("%s EMF record: %v\n%s", name, errors.Join(errs...), line)
				}
			case m["msg"] == observe.DecisionMessage:
				decisions++
			case m["msg"] == "redis client":
				redisLines++
			}
		}
		if records == 0 || decisions == 0 {
			t.Errorf("the %s function printed %d records and %d decision lines: the search above searched nothing", name, records, decisions)
		}
		t.Logf("%s function: %d EMF records, %d decision lines, %d go-redis lines searched", name, records, decisions, redisLines)
	}
}

// obsEmulatorLine reports whether a line of the emulator's output is the
// emulator's own (START/END/REPORT lines, its timestamped messages), not
// the function's.
func obsEmulatorLine(line string) bool {
	for _, prefix := range []string{"START RequestId:", "END RequestId:", "REPORT RequestId:", "INIT_REPORT", "EXTENSION"} {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	// aws-lambda-go's own line when the emulator's runtime API is gone (the
	// test stopping the emulator while the function polls for its next
	// invocation): the emulator's shutdown, not the function's output.
	if strings.Contains(line, " failed to get the next invoke: ") && strings.Contains(line, "/2018-06-01/runtime/invocation/next") {
		return true
	}
	// The emulator's log lines: "29 Nov 2026 21:00:00,000 [INFO] (rapid) ...".
	return strings.Contains(line, "] (rapid) ") || strings.Contains(line, "[ERROR] (rapid)") || strings.Contains(line, "[WARNING] (rapid)")
}
