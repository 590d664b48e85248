package observe

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// emfDoc is an EMF record as CloudWatch reads it.
type emfDoc struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
}

// metricSpec is "Name/Unit" of each metric of each directive.
func (d emfDoc) metricSpec() [][]string {
	var out [][]string
	for _, dir := range d.AWS.CloudWatchMetrics {
		var names []string
		for _, m := range dir.Metrics {
			names = append(names, m.Name+"/"+m.Unit)
		}
		out = append(out, names)
	}
	return out
}

func TestAppendEMF(t *testing.T) {
	base := metricsRecord{
		tier: "anonymous", outcome: "allowed",
		decisionLatency: 1234 * time.Microsecond, redisLatency: 812 * time.Microsecond,
		breakerState: "closed", timestampMillis: 1796040000123,
		requestID: "c6af9ac6-7b61-11e6-9a41-93e8deadbeef", lambdaRequestID: "8f5e2b0c-1d1e-4b8a-9a7e-6c3e1d2f4a5b",
	}
	decisions := []string{"Decisions/Count", "DecisionLatency/Milliseconds"}
	cases := []struct {
		name       string
		edit       func(r *metricsRecord)
		wantSpec   [][]string
		wantValues map[string]any // root members, exactly
	}{
		{"allowed on Redis", func(*metricsRecord) {},
			[][]string{decisions, {"RedisLatency/Milliseconds", "BreakerOpen/None"}},
			map[string]any{"tier": "anonymous", "outcome": "allowed", "Decisions": 1.0, "DecisionLatency": 1.234, "RedisLatency": 0.812,
				"BreakerOpen": 0.0, "breakerState": "closed", "requestId": base.requestID, "lambdaRequestId": base.lambdaRequestID}},
		{"degraded with the breaker just opened: no RedisLatency, the change counted", func(r *metricsRecord) {
			r.outcome, r.redisLatency, r.breakerState, r.breakerChanges = "degraded", 0, "open", 1
			r.requestID, r.lambdaRequestID = "", ""
		},
			[][]string{decisions, {"BreakerOpen/None", "BreakerStateChanges/Count"}},
			map[string]any{"tier": "anonymous", "outcome": "degraded", "Decisions": 1.0, "DecisionLatency": 1.234,
				"BreakerOpen": 1.0, "BreakerStateChanges": 1.0, "breakerState": "open"}},
		{"half-open is not open", func(r *metricsRecord) {
			r.outcome, r.breakerState, r.breakerChanges, r.tier = "denied", "half-open", 2, "org"
			r.requestID, r.lambdaRequestID = "", ""
		},
			[][]string{decisions, {"RedisLatency/Milliseconds", "BreakerOpen/None", "BreakerStateChanges/Count"}},
			map[string]any{"tier": "org", "outcome": "denied", "Decisions": 1.0, "DecisionLatency": 1.234, "RedisLatency": 0.812,
				"BreakerOpen": 0.0, "BreakerStateChanges": 2.0, "breakerState": "half-open"}},
		{"an empty tier is still a valid dimension value", func(r *metricsRecord) {
			r.tier, r.outcome, r.requestID, r.lambdaRequestID = "", "rejected", "", ""
		},
			[][]string{decisions, {"RedisLatency/Milliseconds", "BreakerOpen/None"}},
			map[string]any{"tier": "unknown", "outcome": "rejected", "Decisions": 1.0, "DecisionLatency": 1.234, "RedisLatency": 0.812,
				"BreakerOpen": 0.0, "breakerState": "closed"}},
		{"strange request ids are escaped", func(r *metricsRecord) {
			r.requestID, r.lambdaRequestID = "a\"b\\c\nd\x01e", "bad \xff utf-8 ✓"
		},
			[][]string{decisions, {"RedisLatency/Milliseconds", "BreakerOpen/None"}},
			map[string]any{"tier": "anonymous", "outcome": "allowed", "Decisions": 1.0, "DecisionLatency": 1.234, "RedisLatency": 0.812,
				"BreakerOpen": 0.0, "breakerState": "closed", "requestId": "a\"b\\c\nd\x01e", "lambdaRequestId": "bad \ufffd utf-8 ✓"}},
		{"denied by a live block: counted by control", func(r *metricsRecord) {
			r.outcome, r.control, r.requestID, r.lambdaRequestID = "denied", "blocked-by-control", "", ""
		},
			[][]string{decisions, {"RedisLatency/Milliseconds", "BreakerOpen/None"}, {"ControlledDecisions/Count"}},
			map[string]any{"tier": "anonymous", "outcome": "denied", "Decisions": 1.0, "DecisionLatency": 1.234, "RedisLatency": 0.812,
				"BreakerOpen": 0.0, "breakerState": "closed", "control": "blocked-by-control", "ControlledDecisions": 1.0}},
		{"a malformed control record: counted, no control", func(r *metricsRecord) {
			r.malformed, r.requestID, r.lambdaRequestID = true, "", ""
		},
			[][]string{decisions, {"RedisLatency/Milliseconds", "BreakerOpen/None", "MalformedControls/Count"}},
			map[string]any{"tier": "anonymous", "outcome": "allowed", "Decisions": 1.0, "DecisionLatency": 1.234, "RedisLatency": 0.812,
				"BreakerOpen": 0.0, "breakerState": "closed", "MalformedControls": 1.0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			tc.edit(&r)
			line := appendEMF(nil, r)
			if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
				t.Fatalf("not one line: %q", line)
			}
			var doc emfDoc
			if err := json.Unmarshal(line, &doc); err != nil {
				t.Fatalf("not JSON: %v: %s", err, line)
			}
			if doc.AWS.Timestamp != r.timestampMillis {
				t.Errorf("Timestamp %d, want %d", doc.AWS.Timestamp, r.timestampMillis)
			}
			for i, dir := range doc.AWS.CloudWatchMetrics {
				if dir.Namespace != "slidegate" {
					t.Errorf("directive %d: namespace %q", i, dir.Namespace)
				}
			}
			if got := doc.AWS.CloudWatchMetrics[0].Dimensions; !reflect.DeepEqual(got, [][]string{{"tier", "outcome"}, {"outcome"}}) {
				t.Errorf("first directive's dimensions %v", got)
			}
			if got := doc.AWS.CloudWatchMetrics[1].Dimensions; !reflect.DeepEqual(got, [][]string{{}}) {
				t.Errorf("second directive's dimensions %v, want one empty set", got)
			}
			if len(doc.AWS.CloudWatchMetrics) == 3 {
				if got := doc.AWS.CloudWatchMetrics[2].Dimensions; !reflect.DeepEqual(got, [][]string{{"control"}}) {
					t.Errorf("third directive's dimensions %v, want control", got)
				}
			}
			if got := doc.metricSpec(); !reflect.DeepEqual(got, tc.wantSpec) {
				t.Errorf("metrics %v, want %v", got, tc.wantSpec)
			}
			var root map[string]any
			if err := json.Unmarshal(line, &root); err != nil {
				t.Fatal(err)
			}
			delete(root, "_aws")
			if !reflect.DeepEqual(root, tc.wantValues) {
				t.Errorf("members %v\nwant    %v", root, tc.wantValues)
			}
		})
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("stdout closed") }

func TestMetricsWriter(t *testing.T) {
	if newMetricsWriter(nil) == nil {
		t.Error("a nil writer is not io.Discard")
	}
	var nothing *metricsWriter
	if err := nothing.write(metricsRecord{}); err != nil {
		t.Errorf("no metrics: %v", err)
	}
	var out bytes.Buffer
	m := newMetricsWriter(&out)
	for range 3 {
		if err := m.write(metricsRecord{tier: "user", outcome: "denied"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 3 {
		t.Errorf("%d lines for 3 records", n)
	}
	err := newMetricsWriter(failingWriter{}).write(metricsRecord{})
	if err == nil || !strings.Contains(err.Error(), "write EMF record: stdout closed") {
		t.Errorf("error %v, want it wrapped", err)
	}
}

func TestBreakerWatch(t *testing.T) {
	w := newBreakerWatch()
	if n, s := w.take(); n != 0 || s != "closed" {
		t.Fatalf("new watch: %d changes, %s", n, s)
	}
	w.changed("closed", "open")
	w.changed("open", "half-open")
	if n, s := w.take(); n != 2 || s != "half-open" {
		t.Fatalf("after two changes: %d, %s", n, s)
	}
	if n, s := w.take(); n != 0 || s != "half-open" {
		t.Fatalf("changes are taken once: %d, %s", n, s)
	}
}
