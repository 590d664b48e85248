package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/version"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// Planted values that must never reach a log line or a metric.
const (
	plantedIP  = "203.0.113.77"
	plantedKey = "planted-api-key-Zq81"
)

var anonymousLimit = ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}

// record builds the decision record of a request from plantedIP.
func record(outcome string) Observation {
	rec := Observation{
		Request: apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: plantedIP, RequestID: "api-req-1", LambdaRequestID: "lambda-req-1",
			Headers: map[string]string{"x-api-key": plantedKey}},
		Outcome: apigw.Outcome{Caller: identity.Caller{Tier: identity.TierAnonymous, Identity: identity.KindIP + plantedIP}, IdentityHash: identity.Hash(identity.KindIP + plantedIP)},
		Latency: 1500 * time.Microsecond,
	}
	unauthorized := false
	allowed := ratelimit.Decision{Limit: anonymousLimit, Allowed: true, Remaining: 12, ResetAfter: 41 * time.Second}
	denied := ratelimit.Decision{Limit: anonymousLimit, Remaining: 0, ResetAfter: time.Minute, RetryAfter: 17500 * time.Millisecond}
	switch outcome {
	case "allowed":
		rec.Outcome.Result = ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{allowed}, RedisLatency: 700 * time.Microsecond}
	case "denied":
		rec.Outcome.Result = ratelimit.Result{Decisions: []ratelimit.Decision{denied}, RedisLatency: 700 * time.Microsecond}
	case "degraded", "degraded, breaker open", "degraded, long cause":
		allowed.Degraded = true
		rec.Outcome.Result = ratelimit.Result{Allowed: true, Degraded: true, Decisions: []ratelimit.Decision{allowed},
			RedisLatency: 50 * time.Millisecond, Cause: fmt.Errorf("%w: run script sliding_window.lua: i/o timeout", ratelimit.ErrUnavailable)}
		switch outcome {
		case "degraded, breaker open":
			rec.Outcome.Result.RedisLatency = 0
			rec.Outcome.Result.Cause = fmt.Errorf("%w: circuit breaker open after repeated Redis failures", ratelimit.ErrUnavailable)
		case "degraded, long cause":
			rec.Outcome.Result.Cause = fmt.Errorf("%w: %s", ratelimit.ErrUnavailable, strings.Repeat("x", 300))
		}
	case "unauthorized":
		unauthorized = true
		rec.Credential = "unknown api key"
		rec.Outcome.Result = ratelimit.Result{Allowed: true, Decisions: []ratelimit.Decision{allowed}, RedisLatency: 700 * time.Microsecond}
	case "unavailable":
		rec.Request.Method, rec.Request.Path = "POST", "/auth/login"
		rec.Outcome.FailClosed = true
		rec.Err = fmt.Errorf("decide POST /auth/login for anonymous: %w: dial tcp 127.0.0.1:1: connection refused", ratelimit.ErrUnavailable)
		rec.Outcome.Result = ratelimit.Result{RedisLatency: 300 * time.Microsecond}
	case "undecidable":
		rec.Err = fmt.Errorf("decide GET /v1/items for anonymous: %w: window too long", ratelimit.ErrInvalid)
	}
	rec.Outcome.Kind = httplimit.KindOf(httplimit.Decided{Unauthorized: unauthorized, Result: rec.Outcome.Result, Err: rec.Err})
	return rec
}

// captured is what an observer wrote.
type captured struct {
	logs, metrics bytes.Buffer
}

func (c *captured) lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

func newCapturingObserver(level slog.Level, sampling LogSampling) (*Observer, *captured) {
	c := &captured{}
	logger := slog.New(slog.NewJSONHandler(&c.logs, &slog.HandlerOptions{Level: level}))
	return New(logger, &c.metrics, sampling), c
}

func TestDecisionObserverLogLines(t *testing.T) {
	hashed := identity.Hash(identity.KindIP + plantedIP)
	common := map[string]any{"msg": DecisionMessage, "tier": "anonymous", "identity": hashed,
		"requestId": "api-req-1", "lambdaRequestId": "lambda-req-1", "latencyMs": 1.5, "version": version.Version()}
	withLimit := map[string]any{"limitName": "anonymous", "limit": 30.0, "window": 60.0}
	cases := []struct {
		name        string
		record      string
		level       slog.Level // the logger's
		wantOutcome string
		wantLine    map[string]any // nil: no line; else fields the line must hold (with common)
		wantAbsent  []string       // fields the line must not hold
	}{
		{"allowed: not logged at info", "allowed", slog.LevelInfo, "allowed", nil, nil},
		{"allowed: Debug at debug", "allowed", slog.LevelDebug, "allowed",
			merge(withLimit, map[string]any{"level": "DEBUG", "outcome": "allowed", "reason": ReasonWithinLimit, "route": "GET /v1/items",
				"allowed": true, "remaining": 12.0, "redisMs": 0.7}),
			[]string{"retryAfter", "unauthorized", "error", "breakerState", "suppressed"}},
		{"denied: Info, with retryAfter", "denied", slog.LevelInfo, "denied",
			merge(withLimit, map[string]any{"level": "INFO", "outcome": "denied", "reason": ReasonOverLimit, "route": "GET /v1/items",
				"allowed": false, "remaining": 0.0, "retryAfter": 18.0}),
			[]string{"error", "unauthorized"}},
		{"degraded: Warn, with the failed call's time and why it failed", "degraded", slog.LevelInfo, "degraded",
			merge(withLimit, map[string]any{"level": "WARN", "outcome": "degraded", "reason": ReasonFallback, "allowed": true,
				"redisMs": 50.0, "redisError": "rate limiter unavailable: run script sliding_window.lua: i/o timeout"}),
			[]string{"error"}},
		{"degraded with the breaker open: why, no Redis time", "degraded, breaker open", slog.LevelInfo, "degraded",
			merge(withLimit, map[string]any{"level": "WARN", "outcome": "degraded", "reason": ReasonFallback,
				"redisError": "rate limiter unavailable: circuit breaker open after repeated Redis failures"}),
			[]string{"redisMs", "error"}},
		{"degraded: a long cause is clipped", "degraded, long cause", slog.LevelInfo, "degraded",
			map[string]any{"redisError": ("rate limiter unavailable: " + strings.Repeat("x", 300))[:maxRedisErrorLen] + "..."},
			nil},
		{"unauthorized: Warn, rejected, with the credential's note", "unauthorized", slog.LevelInfo, "rejected",
			merge(withLimit, map[string]any{"level": "WARN", "outcome": "rejected", "reason": ReasonUnauthorized, "unauthorized": true,
				"credential": "unknown api key", "allowed": true}),
			[]string{"error"}},
		{"unavailable fail-closed route: Error", "unavailable", slog.LevelInfo, "rejected",
			map[string]any{"level": "ERROR", "outcome": "rejected", "reason": ReasonUnavailable, "route": "POST /auth/login",
				"failClosed": true, "allowed": false, "redisMs": 0.3},
			[]string{"limitName", "retryAfter", "redisError"}},
		{"undecidable: Error", "undecidable", slog.LevelInfo, "rejected",
			map[string]any{"level": "ERROR", "outcome": "rejected", "reason": ReasonUndecidable},
			nil},
		{"denied at warn: not logged", "denied", slog.LevelWarn, "denied", nil, nil},
		{"unavailable at error: logged", "unavailable", slog.LevelError, "rejected",
			map[string]any{"level": "ERROR", "reason": ReasonUnavailable}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, c := newCapturingObserver(tc.level, LogSampling{})
			rec := record(tc.record)
			o.Observe(context.Background(), rec)

			metrics := c.lines(t, &c.metrics)
			if len(metrics) != 1 || metrics[0]["outcome"] != tc.wantOutcome || metrics[0]["Decisions"] != 1.0 {
				t.Fatalf("metrics %v, want one record of outcome %s", metrics, tc.wantOutcome)
			}
			if _, ok := metrics[0]["RedisLatency"]; ok != (rec.Outcome.Result.RedisLatency > 0) {
				t.Errorf("metrics %v: RedisLatency present %v, want it exactly when Redis was asked (%v)", metrics[0], ok, rec.Outcome.Result.RedisLatency)
			}
			logs := c.lines(t, &c.logs)
			if tc.wantLine == nil {
				if len(logs) != 0 {
					t.Fatalf("want no log line, got %v", logs)
				}
				return
			}
			if len(logs) != 1 {
				t.Fatalf("want one log line, got %v", logs)
			}
			for k, v := range merge(common, tc.wantLine) {
				if logs[0][k] != v {
					t.Errorf("%s = %#v, want %#v", k, logs[0][k], v)
				}
			}
			for _, k := range tc.wantAbsent {
				if v, ok := logs[0][k]; ok {
					t.Errorf("%s = %v, want it absent", k, v)
				}
			}
			for _, secret := range []string{plantedIP, plantedKey} {
				if strings.Contains(c.logs.String(), secret) || strings.Contains(c.metrics.String(), secret) {
					t.Errorf("%q in the output:\n%s%s", secret, c.logs.String(), c.metrics.String())
				}
			}
		})
	}
}

func merge(maps ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestDecisionObserverSamplesLogsNeverMetrics: a flood of denials at one
// instant writes the burst of log lines, one metrics record per decision,
// and the next line written says how many were dropped.
func TestDecisionObserverSamplesLogsNeverMetrics(t *testing.T) {
	clock := newStepClock()
	o, c := newCapturingObserver(slog.LevelInfo, LogSampling{Now: clock.Now})
	ctx := context.Background()
	const flood = 500
	for range flood {
		o.Observe(ctx, record("denied"))
	}
	// Another outcome has its own budget.
	o.Observe(ctx, record("degraded"))
	if got := len(c.lines(t, &c.logs)); got != DefaultLogBurst+1 {
		t.Fatalf("%d log lines for %d denials and a degraded decision, want the burst %d and 1", got, flood, DefaultLogBurst)
	}
	if got := len(c.lines(t, &c.metrics)); got != flood+1 {
		t.Fatalf("%d metrics records for %d decisions", got, flood+1)
	}
	c.logs.Reset()
	clock.Advance(time.Second)
	o.Observe(ctx, record("denied"))
	logs := c.lines(t, &c.logs)
	if len(logs) != 1 || logs[0]["suppressed"] != float64(flood-DefaultLogBurst) {
		t.Fatalf("first line after the flood: %v, want suppressed %d", logs, flood-DefaultLogBurst)
	}
}

// TestDecisionObserverBudgetsEachReasonApart: decision lines are budgeted
// per outcome and reason. A flood of lines any caller can cause (a spray of
// unknown API keys, rejected at Warn) uses up its own budget only: the
// line of a fail-closed route Redis could not decide, rejected too but at
// Error, is still written, and so is the reverse.
func TestDecisionObserverBudgetsEachReasonApart(t *testing.T) {
	cases := []struct {
		name     string
		flood    string // record of the flood
		next     string // record of the line after it
		wantNext string // level of that line; "" when it is sampled out
	}{
		{"a key spray does not hide a fail-closed route Redis could not decide", "unauthorized", "unavailable", "ERROR"},
		{"a key spray does not hide undecidable limits", "unauthorized", "undecidable", "ERROR"},
		{"fail-closed errors do not hide a key spray", "unavailable", "unauthorized", "WARN"},
		{"a key spray uses up its own budget", "unauthorized", "unauthorized", ""},
		{"fail-closed errors use up their own budget", "unavailable", "unavailable", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newStepClock()
			o, c := newCapturingObserver(slog.LevelInfo, LogSampling{Now: clock.Now})
			ctx := context.Background()
			for range 10 * DefaultLogBurst {
				o.Observe(ctx, record(tc.flood))
			}
			if got := len(c.lines(t, &c.logs)); got != DefaultLogBurst {
				t.Fatalf("the flood wrote %d lines, want its burst %d", got, DefaultLogBurst)
			}
			c.logs.Reset()
			o.Observe(ctx, record(tc.next))
			logs := c.lines(t, &c.logs)
			if tc.wantNext == "" {
				if len(logs) != 0 {
					t.Fatalf("line after the flood written: %v, want it sampled out", logs)
				}
				return
			}
			if len(logs) != 1 || logs[0]["level"] != tc.wantNext || logs[0]["outcome"] != "rejected" || logs[0]["suppressed"] != nil {
				t.Fatalf("line after the flood: %v, want one rejected %s line with nothing suppressed", logs, tc.wantNext)
			}
		})
	}
}

// TestDecisionObserverReportsBreakerChanges: the breaker's changes reach
// the next record (BreakerStateChanges, BreakerOpen) and one log line,
// once.
func TestDecisionObserverReportsBreakerChanges(t *testing.T) {
	o, c := newCapturingObserver(slog.LevelInfo, LogSampling{})
	ctx := context.Background()
	o.breaker.changed("closed", "open")
	o.Observe(ctx, record("degraded"))
	o.Observe(ctx, record("degraded"))
	o.breaker.changed("open", "half-open")
	o.breaker.changed("half-open", "closed")
	o.Observe(ctx, record("allowed"))

	metrics := c.lines(t, &c.metrics)
	want := []struct {
		changes any
		open    float64
		state   string
	}{{1.0, 1, "open"}, {nil, 1, "open"}, {2.0, 0, "closed"}}
	for i, w := range want {
		m := metrics[i]
		if m["BreakerStateChanges"] != w.changes || m["BreakerOpen"] != w.open || m["breakerState"] != w.state {
			t.Errorf("record %d: changes %v open %v state %v, want %v %v %v", i+1, m["BreakerStateChanges"], m["BreakerOpen"], m["breakerState"], w.changes, w.open, w.state)
		}
	}
	var changes []string
	for _, l := range c.lines(t, &c.logs) {
		switch l["msg"] {
		case "redis circuit breaker changed state":
			changes = append(changes, fmt.Sprintf("%s %s x%v", l["level"], l["breakerState"], l["breakerStateChanges"]))
		case DecisionMessage:
			if l["breakerState"] != "open" {
				t.Errorf("degraded line with the breaker open: breakerState %v", l["breakerState"])
			}
		}
	}
	if want := []string{"WARN open x1", "INFO closed x2"}; strings.Join(changes, "; ") != strings.Join(want, "; ") {
		t.Errorf("breaker lines %v, want %v", changes, want)
	}
}

// TestDecisionObserverLogsAMetricsFailure: a broken metrics writer is
// reported in the log (within its budget), and the decision still logged.
func TestDecisionObserverLogsAMetricsFailure(t *testing.T) {
	var logs bytes.Buffer
	o := New(slog.New(slog.NewJSONHandler(&logs, nil)), failingWriter{}, LogSampling{})
	o.Observe(context.Background(), record("denied"))
	if !strings.Contains(logs.String(), `"msg":"write metrics failed"`) || !strings.Contains(logs.String(), "stdout closed") ||
		!strings.Contains(logs.String(), `"msg":"`+DecisionMessage+`"`) {
		t.Errorf("log:\n%s", logs.String())
	}
}

// discardWriter is io.Discard that the observer does not recognise, so
// that the metrics are built and written.
type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkDecisionObservability is the cost that logging and metrics add
// to one decision (Redis not included): nothing at all, metrics alone, and
// the production setups.
func BenchmarkDecisionObservability(b *testing.B) {
	frozen := func() time.Time { return stepStart }
	cases := []struct {
		name     string
		logger   *slog.Logger
		metrics  io.Writer
		sampling LogSampling
		record   string
	}{
		{"none", slog.New(slog.DiscardHandler), io.Discard, LogSampling{}, "allowed"},
		{"metrics-only", slog.New(slog.DiscardHandler), discardWriter{}, LogSampling{}, "allowed"},
		{"info/allowed", jsonLogger(slog.LevelInfo), discardWriter{}, LogSampling{}, "allowed"},
		{"info/denied", jsonLogger(slog.LevelInfo), discardWriter{}, LogSampling{PerSecond: -1}, "denied"},
		{"info/denied-sampled-out", jsonLogger(slog.LevelInfo), discardWriter{}, LogSampling{Now: frozen}, "denied"},
		{"info/degraded", jsonLogger(slog.LevelInfo), discardWriter{}, LogSampling{PerSecond: -1}, "degraded"},
		{"debug/allowed", jsonLogger(slog.LevelDebug), discardWriter{}, LogSampling{PerSecond: -1}, "allowed"},
	}
	ctx := context.Background()
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			o := New(bc.logger, bc.metrics, bc.sampling)
			rec := record(bc.record)
			b.ReportAllocs()
			for b.Loop() {
				o.Observe(ctx, rec)
			}
		})
	}
}

func jsonLogger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: level}))
}

// TestDecisionObserverConcurrentUse: decisions observed at once (the local
// API serves requests concurrently) each write one whole record line, and
// breaker changes are counted exactly once.
func TestDecisionObserverConcurrentUse(t *testing.T) {
	out := &testkit.Buffer{}
	o := New(slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})), out, LogSampling{PerSecond: -1})
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if i == 0 {
					o.breaker.changed("closed", "open")
				}
				o.Observe(context.Background(), record([]string{"allowed", "denied"}[w%2]))
			}
		})
	}
	wg.Wait()
	var records, decisions int
	var changes float64
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("torn line: %v: %q", err, line)
		}
		switch {
		case m["_aws"] != nil:
			records++
			if n, ok := m["BreakerStateChanges"].(float64); ok {
				changes += n
			}
		case m["msg"] == DecisionMessage:
			decisions++
		}
	}
	if records != workers*each || decisions != workers*each || changes != workers {
		t.Fatalf("%d records, %d decision lines, %v changes; want %d, %d, %d", records, decisions, changes, workers*each, workers*each, workers)
	}
}

// TestDecisionObserverNamesTheControl: a decision a live control changed
// carries the control on its line and in its metrics record; a malformed
// record is a Warn line of its own, per decision that found it, naming the
// caller by its hash only, and counted.
func TestDecisionObserverNamesTheControl(t *testing.T) {
	until := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		edit     func(*Observation)
		want     map[string]any
		wantCtl  string
		wantWarn bool
	}{
		{"an identity block", func(r *Observation) {
			r.Outcome.Result.Control = controls.Applied{Kind: controls.Block, Until: until}
		}, map[string]any{"outcome": "denied", "reason": ReasonControlBlocked, "control": "blocked-by-control", "controlUntil": "2026-12-02T06:00:00Z"}, "blocked-by-control", false},
		{"a scale", func(r *Observation) {
			r.Outcome.Result.Control = controls.Applied{Kind: controls.Scale, Until: until, Factor: 0.1}
		}, map[string]any{"outcome": "denied", "reason": ReasonOverLimit, "control": "scaled", "controlFactor": 0.1}, "scaled", false},
		{"a network block", func(r *Observation) {
			r.Outcome.Kind, r.Outcome.Result = apigw.Blocked, ratelimit.Result{Control: controls.Applied{Kind: controls.Block, Until: until}}
		}, map[string]any{"outcome": "blocked", "reason": ReasonControlBlocked, "control": "blocked-by-control"}, "blocked-by-control", false},
		{"a malformed record", func(r *Observation) {
			r.Outcome.Result.Control = controls.Applied{Malformed: true}
		}, map[string]any{"outcome": "denied", "reason": ReasonOverLimit}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, c := newCapturingObserver(slog.LevelInfo, LogSampling{})
			rec := record("denied")
			tc.edit(&rec)
			for range 2 {
				o.Observe(context.Background(), rec)
			}
			var decisions, warnings []map[string]any
			for _, l := range c.lines(t, &c.logs) {
				switch l["msg"] {
				case DecisionMessage:
					decisions = append(decisions, l)
				case MalformedControlMessage:
					warnings = append(warnings, l)
				}
			}
			if len(decisions) != 2 {
				t.Fatalf("%d decision lines, want 2", len(decisions))
			}
			for k, v := range tc.want {
				if decisions[0][k] != v {
					t.Errorf("line %s = %v, want %v", k, decisions[0][k], v)
				}
			}
			if _, ok := decisions[0]["control"]; ok != (tc.wantCtl != "") {
				t.Errorf("line %v: control present %v", decisions[0], ok)
			}
			if tc.wantWarn != (len(warnings) == 2) || (!tc.wantWarn && len(warnings) > 0) {
				t.Fatalf("%d malformed-control warnings, want %v (one per decision)", len(warnings), tc.wantWarn)
			}
			if tc.wantWarn && (warnings[0]["level"] != "WARN" || warnings[0]["identity"] != identity.Hash(identity.KindIP+plantedIP)) {
				t.Errorf("warning %v: want WARN naming the hashed identity", warnings[0])
			}
			metrics := c.lines(t, &c.metrics)
			if tc.wantCtl != "" && (metrics[0]["control"] != tc.wantCtl || metrics[0]["ControlledDecisions"] != 1.0) {
				t.Errorf("metrics %v, want control %s counted", metrics[0], tc.wantCtl)
			}
			if tc.wantWarn && metrics[0]["MalformedControls"] != 1.0 {
				t.Errorf("metrics %v, want MalformedControls 1", metrics[0])
			}
			if all := c.logs.String() + c.metrics.String(); strings.Contains(all, plantedIP) || strings.Contains(all, plantedKey) {
				t.Errorf("the caller's address or key in clear: %s", all)
			}
		})
	}
}
