//go:build otel && !noxray

package tracing_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// collector is a real OTLP/HTTP receiver on loopback: it decodes each
// request as the official ExportTraceServiceRequest protobuf, as the
// collector extension of the ADOT Lambda layer does, and keeps the spans.
type collector struct {
	url string
	mu  sync.Mutex
	// spans received, with their resource's attributes.
	spans    []*tracepb.Span
	resource map[string]string
	requests int
	failures []string
}

func startCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.url = srv.URL + "/v1/traces"
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	fail := func(format string) {
		c.mu.Lock()
		c.failures = append(c.failures, format)
		c.mu.Unlock()
		http.Error(w, format, http.StatusBadRequest)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		fail(r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type") + ": want POST /v1/traces application/x-protobuf")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail("read: " + err.Error())
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		fail("decode ExportTraceServiceRequest: " + err.Error())
		return
	}
	c.mu.Lock()
	c.requests++
	for _, rs := range req.ResourceSpans {
		c.resource = attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// take returns the spans received so far and forgets them.
func (c *collector) take(t *testing.T) []*tracepb.Span {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) > 0 {
		t.Fatalf("the collector refused requests: %q", c.failures)
	}
	spans := c.spans
	c.spans = nil
	return spans
}

// attrs are OTLP attributes as strings (ints in decimal).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		}
	}
	return m
}

// configureOTel points the build's tracer at c.
func configureOTel(t *testing.T, c *collector) {
	t.Helper()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", c.url)
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "slidegate-test-authorizer")
	t.Setenv("OTEL_SDK_DISABLED", "")
	if err := tracing.Configure(tracing.Options{}); err != nil {
		t.Fatal(err)
	}
}

// newTraceHeader is a fresh Lambda trace header and its IDs in W3C hex.
func newTraceHeader(n int, sampled string) (header, traceID, parentID string) {
	traceID = hex.EncodeToString([]byte{0x67, 0x89, 0x12, 0x33, byte(n), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, byte(n)})
	parentID = hex.EncodeToString([]byte{0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, byte(n), 0xd8})
	return "Root=1-" + traceID[:8] + "-" + traceID[8:] + ";Parent=" + parentID + ";Sampled=" + sampled, traceID, parentID
}

// invocationContext is the context aws-lambda-go gives an invocation.
func invocationContext(header, requestID string) context.Context {
	//lint:ignore SA1029 aws-lambda-go's key is this plain string.
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", header)
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       requestID,
		InvokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:slidegate-test-authorizer",
	})
}

// wantSpan is what one span should say.
type wantSpan struct {
	name   string
	kind   tracepb.Span_SpanKind
	attrs  map[string]string
	failed bool
}

// TestOTelSpansJoinLambdaTrace runs decisions on a real redis-server in
// sampled invocations, through Handler, and checks what a real OTLP
// receiver gets: per invocation a server span whose parent is the trace
// header's Parent in its Root's trace, and under it one client span per
// Redis call, with the X-Ray build's tier and outcome.
func TestOTelSpansJoinLambdaTrace(t *testing.T) {
	col := startCollector(t)
	configureOTel(t, col)
	server := redistest.StartServer(t)
	admin := server.Client(t)
	client, err := redisclient.New(redisclient.Config{URL: server.URL(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	tracing.Instrument(client)
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "oteltest"})
	if err != nil {
		t.Fatal(err)
	}
	if err := limiter.LoadScripts(context.Background()); err != nil { // untraced: no span
		t.Fatal(err)
	}
	check := ratelimit.Check{Identity: "198.51.100.23", Limit: ratelimit.Limit{Name: "user", Count: 2, Window: time.Minute}}
	handler := tracing.Handler(lambda.NewHandler(func(ctx context.Context) (bool, error) {
		res, err := limiter.Decide(tracing.WithTier(ctx, "user"), 1, check)
		return res.Allowed, err
	}))
	otherCheck := ratelimit.Check{Identity: "198.51.100.99", Limit: check.Limit}
	other := tracing.Handler(lambda.NewHandler(func(ctx context.Context) (bool, error) {
		res, err := limiter.Decide(tracing.WithTier(ctx, "user"), 1, otherCheck)
		return res.Allowed, err
	}))
	invocationAttrs := func(requestID, outcome string) map[string]string {
		return map[string]string{"tier": "user", "outcome": outcome, "faas.invocation_id": requestID,
			"cloud.resource_id": "arn:aws:lambda:us-east-1:123456789012:function:slidegate-test-authorizer"}
	}
	redisAttrs := func(command, outcome, errorType string) map[string]string {
		m := map[string]string{"db.system.name": "redis", "db.operation.name": command, "tier": "user", "outcome": outcome}
		if errorType != "" {
			m["error.type"] = errorType
		}
		return m
	}
	invocationSpan := wantSpan{name: "slidegate-test-authorizer", kind: tracepb.Span_SPAN_KIND_SERVER}
	steps := []struct {
		name    string
		setup   func(t *testing.T)
		wantErr bool
		want    []wantSpan // the invocation's first, then its calls
	}{
		{name: "allowed", want: []wantSpan{
			{invocationSpan.name, invocationSpan.kind, invocationAttrs("req-0", "allowed"), false},
			{"redis", tracepb.Span_SPAN_KIND_CLIENT, redisAttrs("EVALSHA", "allowed", ""), false},
		}},
		{name: "allowed again", want: []wantSpan{
			{invocationSpan.name, invocationSpan.kind, invocationAttrs("req-1", "allowed"), false},
			{"redis", tracepb.Span_SPAN_KIND_CLIENT, redisAttrs("EVALSHA", "allowed", ""), false},
		}},
		{name: "past the limit, after a flushed script cache: NOSCRIPT, then EVAL denies", setup: func(t *testing.T) {
			if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		}, want: []wantSpan{
			{invocationSpan.name, invocationSpan.kind, invocationAttrs("req-2", "denied"), false},
			{"redis", tracepb.Span_SPAN_KIND_CLIENT, redisAttrs("EVALSHA", "error", "error"), true},
			{"redis", tracepb.Span_SPAN_KIND_CLIENT, redisAttrs("EVAL", "denied", ""), false},
		}},
		{name: "server stopped: a fault", setup: func(*testing.T) { server.Stop() }, wantErr: true, want: []wantSpan{
			{invocationSpan.name, invocationSpan.kind, invocationAttrs("req-3", "error"), true},
			{"redis", tracepb.Span_SPAN_KIND_CLIENT, redisAttrs("EVALSHA", "error", "fault"), true},
		}},
	}
	for i, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.setup != nil {
				s.setup(t)
			}
			header, traceID, parentID := newTraceHeader(i, "1")
			requestID := "req-" + string(rune('0'+i))
			_, err := handler.Invoke(invocationContext(header, requestID), []byte("{}"))
			if (err != nil) != s.wantErr {
				t.Fatalf("invoke: %v, want an error: %v", err, s.wantErr)
			}
			// Handler flushed before returning: the spans are there, and
			// none of the unsampled invocation before (had it recorded
			// any, this flush would have sent them too).
			checkSpans(t, col.take(t), traceID, parentID, s.want)
			// An invocation Lambda did not sample, of another caller: it
			// records nothing.
			unsampled, _, _ := newTraceHeader(100+i, "0")
			_, _ = other.Invoke(invocationContext(unsampled, "unsampled"), []byte("{}"))
		})
	}
	col.mu.Lock()
	res := col.resource
	col.mu.Unlock()
	for k, v := range map[string]string{"service.name": "slidegate-test-authorizer", "faas.name": "slidegate-test-authorizer", "cloud.platform": "aws_lambda"} {
		if res[k] != v {
			t.Errorf("resource %s = %q, want %q (resource %v)", k, res[k], v, res)
		}
	}
}

// checkSpans compares one invocation's spans with want (its own span
// first, then one per call, in the order the calls ended).
func checkSpans(t *testing.T, spans []*tracepb.Span, traceID, parentID string, want []wantSpan) {
	t.Helper()
	if len(spans) != len(want) {
		t.Fatalf("got %d spans, want %d: %v", len(spans), len(want), spans)
	}
	// The SDK exports spans in the order they ended: the calls, then the
	// invocation.
	spans = append(spans[len(spans)-1:], spans[:len(spans)-1]...)
	invocationID := hex.EncodeToString(spans[0].SpanId)
	for i, s := range spans {
		w := want[i]
		wantParent := invocationID
		if i == 0 {
			wantParent = parentID
		}
		if got := hex.EncodeToString(s.TraceId); got != traceID {
			t.Errorf("span %d (%s): trace %s, want the header's Root %s", i, s.Name, got, traceID)
		}
		if got := hex.EncodeToString(s.ParentSpanId); got != wantParent {
			t.Errorf("span %d (%s): parent %s, want %s", i, s.Name, got, wantParent)
		}
		if s.Name != w.name || s.Kind != w.kind {
			t.Errorf("span %d: %s %v, want %s %v", i, s.Name, s.Kind, w.name, w.kind)
		}
		got := attrs(s.Attributes)
		for k, v := range w.attrs {
			if got[k] != v {
				t.Errorf("span %d (%s): %s = %q, want %q (all: %v)", i, s.Name, k, got[k], v, got)
			}
		}
		for k := range got {
			if _, ok := w.attrs[k]; !ok {
				t.Errorf("span %d (%s): unexpected attribute %s = %q", i, s.Name, k, got[k])
			}
		}
		if failed := s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR; failed != w.failed {
			t.Errorf("span %d (%s): status %v, want an error: %v", i, s.Name, s.GetStatus(), w.failed)
		}
		if w.failed && !slices.ContainsFunc(s.Events, func(e *tracepb.Span_Event) bool { return e.Name == "exception" }) {
			t.Errorf("span %d (%s): failed without an exception event", i, s.Name)
		}
	}
}

// TestOTelConfigureRefusesRemoteCollectors: the exporter only ever talks
// to a collector on loopback, over OTLP/HTTP protobuf.
func TestOTelConfigureRefusesRemoteCollectors(t *testing.T) {
	bad := []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://otlp.example.com/v1/traces"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://10.0.0.8:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "localhost:4318"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
	}
	for _, b := range bad {
		t.Run(b.name+"="+b.value, func(t *testing.T) {
			for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED"} {
				t.Setenv(v, "")
			}
			t.Setenv(b.name, b.value)
			if err := tracing.Configure(tracing.Options{}); err == nil {
				t.Fatalf("Configure accepted %s=%s", b.name, b.value)
			}
		})
	}
	t.Run("loopback endpoints", func(t *testing.T) {
		for _, u := range []string{"http://localhost:4318/v1/traces", "http://127.0.0.1:4318/v1/traces", "http://[::1]:4318/v1/traces"} {
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", u)
			if err := tracing.Configure(tracing.Options{}); err != nil {
				t.Errorf("Configure refused %s: %v", u, err)
			}
		}
	})
}

// TestOTelWithoutCollectorStaysQuiet: a sampled invocation with no
// collector listening answers as usual, its flush failing fast (a refused
// connection on loopback), and Handler's answer is h's.
func TestOTelWithoutCollectorStaysQuiet(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler())
	url := ln.URL + "/v1/traces"
	ln.Close() // refused from now on
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
	if err := tracing.Configure(tracing.Options{}); err != nil {
		t.Fatal(err)
	}
	errBoom := errors.New("boom")
	for _, fail := range []bool{false, true} {
		h := tracing.Handler(lambda.NewHandler(func(context.Context) (string, error) {
			if fail {
				return "", errBoom
			}
			return "answered", nil
		}))
		header, _, _ := newTraceHeader(7, "1")
		out, err := h.Invoke(invocationContext(header, "r"), []byte("{}"))
		if fail && !errors.Is(err, errBoom) || !fail && (err != nil || string(out) != `"answered"`) {
			t.Fatalf("invoke = %s, %v; want the handler's own answer", out, err)
		}
	}
}
