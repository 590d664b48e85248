package observe

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
)

// stepStart is where the clocks that tests move by hand start.
var stepStart = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// newStepClock returns a clock tests move by hand.
func newStepClock() *testkit.Clock { return testkit.NewClock(stepStart) }

// stepSampling is a log sampling of perSecond and burst on clock.
func stepSampling(clock *testkit.Clock, perSecond float64, burst int) LogSampling {
	return LogSampling{PerSecond: perSecond, Burst: burst, Now: clock.Now}
}

func TestLogBudget(t *testing.T) {
	type admit struct {
		kind           string
		step           time.Duration // clock step before this line
		wantOK         bool
		wantSuppressed int64
	}
	cases := []struct {
		name            string
		perSecond       float64
		burst           int
		lines           []admit
		unlimitedBudget bool
	}{
		{"a burst passes, the rest is dropped and counted on the next line written", 2, 3, []admit{
			{"denied", 0, true, 0}, {"denied", 0, true, 0}, {"denied", 0, true, 0},
			{"denied", 0, false, 0}, {"denied", 0, false, 0}, {"denied", 0, false, 0},
			{"denied", time.Second, true, 3}, {"denied", 0, true, 0}, {"denied", 0, false, 0},
		}, false},
		{"each kind has its own bucket", 1, 1, []admit{
			{"denied", 0, true, 0}, {"denied", 0, false, 0},
			{"degraded", 0, true, 0}, {"rejected", 0, true, 0}, {"degraded", 0, false, 0},
			{"degraded", time.Second, true, 1}, {"denied", 0, true, 1},
		}, false},
		{"refill stops at the burst", 10, 2, []admit{
			{"a", time.Hour, true, 0}, {"a", 0, true, 0}, {"a", 0, false, 0},
		}, false},
		{"fractions of a token add up", 4, 1, []admit{
			{"a", 0, true, 0}, {"a", 100 * time.Millisecond, false, 0},
			{"a", 100 * time.Millisecond, false, 0}, {"a", 50 * time.Millisecond, true, 2},
		}, false},
		{"a clock stepping back refills nothing", 1, 1, []admit{
			{"a", 0, true, 0}, {"a", -time.Hour, false, 0}, {"a", time.Hour, false, 0}, {"a", time.Second, true, 2},
		}, false},
		{"negative rate: every line", -1, 0, []admit{
			{"a", 0, true, 0}, {"a", 0, true, 0}, {"a", 0, true, 0},
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newStepClock()
			b := newLogBudget(stepSampling(clock, tc.perSecond, tc.burst))
			if (b == nil) != tc.unlimitedBudget {
				t.Fatalf("budget %v, want nil: %v", b, tc.unlimitedBudget)
			}
			for i, l := range tc.lines {
				clock.Advance(l.step)
				ok, suppressed := b.admit(l.kind)
				if ok != l.wantOK || suppressed != l.wantSuppressed {
					t.Fatalf("line %d (%s): admitted %v with %d suppressed, want %v with %d", i+1, l.kind, ok, suppressed, l.wantOK, l.wantSuppressed)
				}
			}
		})
	}
}

func TestLogBudgetDefaultsAndBound(t *testing.T) {
	clock := newStepClock()
	b := newLogBudget(LogSampling{Now: clock.Now})
	admitted := 0
	for range 1000 {
		if ok, _ := b.admit("denied"); ok {
			admitted++
		}
	}
	if admitted != DefaultLogBurst {
		t.Fatalf("default budget admitted %d of a flood, want the burst %d", admitted, DefaultLogBurst)
	}
	clock.Advance(time.Second)
	admitted = 0
	for range 1000 {
		if ok, _ := b.admit("denied"); ok {
			admitted++
		}
	}
	if admitted != DefaultLogLinesPerSecond {
		t.Fatalf("one second later %d admitted, want %d", admitted, DefaultLogLinesPerSecond)
	}
	// Kinds are bounded: past maxLogKinds they share one bucket.
	for i := range 10 * maxLogKinds {
		b.admit(strings.Repeat("k", i))
	}
	if len(b.buckets) > maxLogKinds+1 {
		t.Fatalf("%d buckets, bound %d", len(b.buckets), maxLogKinds+1)
	}
}

func TestSampledHandler(t *testing.T) {
	clock := newStepClock()
	var out bytes.Buffer
	logger := slog.New(SampledHandler(slog.NewJSONHandler(&out, nil), stepSampling(clock, 1, 2))).With("function", "test")
	for range 5 {
		logger.Error("malformed event")
	}
	logger.Error("another message")
	clock.Advance(time.Second)
	logger.Error("malformed event")

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		lines = append(lines, m)
	}
	want := []struct {
		msg        string
		suppressed any
	}{{"malformed event", nil}, {"malformed event", nil}, {"another message", nil}, {"malformed event", float64(3)}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if lines[i]["msg"] != w.msg || lines[i]["suppressed"] != w.suppressed || lines[i]["function"] != "test" {
			t.Errorf("line %d: %v, want msg %q suppressed %v function test", i+1, lines[i], w.msg, w.suppressed)
		}
	}
}
