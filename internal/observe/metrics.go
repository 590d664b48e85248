package observe

import (
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// CloudWatch metrics of slidegate, published with the Embedded Metric
// Format (EMF): one JSON line per decision on the metrics writer
// (Options.Metrics, standard output in Lambda), which CloudWatch Logs turns
// into metrics. No AWS call is made on a request's path.
const (
	// MetricsNamespace is the namespace of every metric.
	MetricsNamespace = "slidegate"
	// MetricDecisions is 1 per decision (Count), by tier and outcome and
	// by outcome alone.
	MetricDecisions = "Decisions"
	// MetricDecisionLatency is the time a decision took in the function,
	// identity and Redis included (Milliseconds), by tier and outcome and
	// by outcome alone.
	MetricDecisionLatency = "DecisionLatency"
	// MetricRedisLatency is the time of a decision's Redis round trips
	// (Milliseconds), with no dimension; absent when Redis was not asked
	// (deny-cache hits, breaker open, local fallback).
	MetricRedisLatency = "RedisLatency"
	// MetricBreakerOpen is 1 when the instance's circuit breaker around
	// Redis is open, 0 otherwise (None), with no dimension: its Maximum
	// says whether any instance had given up on Redis, its Average which
	// share of decisions were made that way.
	MetricBreakerOpen = "BreakerOpen"
	// MetricBreakerStateChanges counts the breaker's state changes since
	// the instance's previous record (Count), with no dimension; present
	// only when there was one.
	MetricBreakerStateChanges = "BreakerStateChanges"
	// MetricControlledDecisions is 1 per decision a live control changed
	// (Count), by control: blocked-by-control, exempt or scaled
	// (apigw.ControlName), three values whatever the number of controls;
	// absent from the other decisions.
	MetricControlledDecisions = "ControlledDecisions"
	// MetricMalformedControls is 1 per decision that found a live control
	// record it could not read and ignored (Count), with no dimension;
	// absent from the other decisions.
	MetricMalformedControls = "MalformedControls"
)

// Dimension and property names of the EMF records.
const (
	emfTier            = "tier"
	emfOutcome         = "outcome"
	emfBreakerState    = "breakerState"
	emfControl         = "control"
	emfRequestID       = "requestId"
	emfLambdaRequestID = "lambdaRequestId"
)

// Circuit breaker states, as pkg/ratelimit names them.
const (
	breakerClosed = "closed"
	breakerOpen   = "open"
)

// metricsRecord is what one decision publishes.
type metricsRecord struct {
	tier, outcome   string
	control         string // apigw.ControlName of the control that changed the decision, "" for none
	malformed       bool   // a control record could not be read
	decisionLatency time.Duration
	redisLatency    time.Duration // zero when Redis was not asked
	requestID       string
	lambdaRequestID string
	breakerState    string
	breakerChanges  int64
	timestampMillis int64
}

// metricsWriter writes EMF records, one JSON line each, with one Write
// per line. It is safe for concurrent use.
type metricsWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// newMetricsWriter returns a writer on w, or nil (no metrics) when w is
// io.Discard.
func newMetricsWriter(w io.Writer) *metricsWriter {
	if w == io.Discard {
		return nil
	}
	return &metricsWriter{w: w, buf: make([]byte, 0, 1024)}
}

// write publishes one record. The error is the writer's.
func (m *metricsWriter) write(r metricsRecord) error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf = appendEMF(m.buf[:0], r)
	if _, err := m.w.Write(m.buf); err != nil {
		return fmt.Errorf("write EMF record: %w", err)
	}
	return nil
}

// The constant parts of a record. The first directive holds the metrics
// by tier and outcome and by outcome alone (template.yaml's
// Decisions{outcome=denied} and Decisions{outcome=degraded} alarms); the
// second those with no dimension (the RedisLatency p99 alarm); a third,
// only on a decision a live control changed, ControlledDecisions by
// control.
const (
	emfHead      = `{"_aws":{"Timestamp":`
	emfDecisions = `,"CloudWatchMetrics":[{"Namespace":"` + MetricsNamespace + `","Dimensions":[["` + emfTier + `","` + emfOutcome + `"],["` + emfOutcome + `"]],` +
		`"Metrics":[{"Name":"` + MetricDecisions + `","Unit":"Count"},{"Name":"` + MetricDecisionLatency + `","Unit":"Milliseconds"}]},` +
		`{"Namespace":"` + MetricsNamespace + `","Dimensions":[[]],"Metrics":[`
	emfRedisDef     = `{"Name":"` + MetricRedisLatency + `","Unit":"Milliseconds"},`
	emfBreakerDef   = `{"Name":"` + MetricBreakerOpen + `","Unit":"None"}`
	emfChangesDef   = `,{"Name":"` + MetricBreakerStateChanges + `","Unit":"Count"}`
	emfMalformedDef = `,{"Name":"` + MetricMalformedControls + `","Unit":"Count"}`
	emfControlDef   = `,{"Namespace":"` + MetricsNamespace + `","Dimensions":[["` + emfControl + `"]],"Metrics":[{"Name":"` + MetricControlledDecisions + `","Unit":"Count"}]}`
)

// appendEMF appends r as one EMF JSON line. It is written by hand, not
// with encoding/json: it runs on every decision, and this way costs no
// allocation.
func appendEMF(b []byte, r metricsRecord) []byte {
	b = append(b, emfHead...)
	b = strconv.AppendInt(b, r.timestampMillis, 10)
	b = append(b, emfDecisions...)
	if r.redisLatency > 0 {
		b = append(b, emfRedisDef...)
	}
	b = append(b, emfBreakerDef...)
	if r.breakerChanges > 0 {
		b = append(b, emfChangesDef...)
	}
	if r.malformed {
		b = append(b, emfMalformedDef...)
	}
	b = append(b, `]}`...)
	if r.control != "" {
		b = append(b, emfControlDef...)
	}
	b = append(b, `]}`...)

	b = appendStringMember(b, emfTier, nonEmpty(r.tier))
	b = appendStringMember(b, emfOutcome, r.outcome)
	b = append(b, `,"`+MetricDecisions+`":1,"`+MetricDecisionLatency+`":`...)
	b = appendMillis(b, r.decisionLatency)
	if r.redisLatency > 0 {
		b = append(b, `,"`+MetricRedisLatency+`":`...)
		b = appendMillis(b, r.redisLatency)
	}
	if r.breakerState == breakerOpen {
		b = append(b, `,"`+MetricBreakerOpen+`":1`...)
	} else {
		b = append(b, `,"`+MetricBreakerOpen+`":0`...)
	}
	if r.breakerChanges > 0 {
		b = append(b, `,"`+MetricBreakerStateChanges+`":`...)
		b = strconv.AppendInt(b, r.breakerChanges, 10)
	}
	if r.malformed {
		b = append(b, `,"`+MetricMalformedControls+`":1`...)
	}
	if r.control != "" {
		b = appendStringMember(b, emfControl, r.control)
		b = append(b, `,"`+MetricControlledDecisions+`":1`...)
	}
	b = appendStringMember(b, emfBreakerState, r.breakerState)
	if r.requestID != "" {
		b = appendStringMember(b, emfRequestID, r.requestID)
	}
	if r.lambdaRequestID != "" {
		b = appendStringMember(b, emfLambdaRequestID, r.lambdaRequestID)
	}
	return append(b, "}\n"...)
}

// nonEmpty keeps a dimension value valid: CloudWatch refuses an empty one.
func nonEmpty(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// appendStringMember appends `,"name":"value"`; name is a constant that
// needs no escaping.
func appendStringMember(b []byte, name, value string) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return appendJSONString(b, value)
}

// appendMillis appends d in milliseconds with microsecond precision.
func appendMillis(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', -1, 64)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// breakerWatch follows the runtime's circuit breaker through
// ratelimit.GateOptions.OnBreakerStateChange: its state, and the changes
// not yet published. It is safe for concurrent use and never blocks, as
// the callback requires.
type breakerWatch struct {
	changes atomic.Int64
	state   atomic.Pointer[string]
}

// newBreakerWatch starts closed, as every breaker does.
func newBreakerWatch() *breakerWatch {
	w := &breakerWatch{}
	closed := breakerClosed
	w.state.Store(&closed)
	return w
}

// changed is the Gate's OnBreakerStateChange.
func (w *breakerWatch) changed(_, to string) {
	w.state.Store(&to)
	w.changes.Add(1)
}

// take returns the changes since the last take, and the current state.
func (w *breakerWatch) take() (changes int64, state string) {
	return w.changes.Swap(0), *w.state.Load()
}
