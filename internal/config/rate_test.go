package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		count  int64
		window time.Duration
		bad    bool
	}{
		{name: "per minute", in: "30/1m", count: 30, window: time.Minute},
		{name: "per ten seconds", in: "5/10s", count: 5, window: 10 * time.Second},
		{name: "per hour", in: "10000/1h", count: 10000, window: time.Hour},
		{name: "bare unit means one", in: "100/m", count: 100, window: time.Minute},
		{name: "spaces are trimmed", in: " 7 / 2s ", count: 7, window: 2 * time.Second},
		{name: "milliseconds", in: "3/250ms", count: 3, window: 250 * time.Millisecond},
		{name: "no slash", in: "30", bad: true},
		{name: "empty", in: "", bad: true},
		{name: "zero count", in: "0/1m", bad: true},
		{name: "negative count", in: "-1/1m", bad: true},
		{name: "count too large", in: "1000001/1m", bad: true},
		{name: "count not a number", in: "x/1m", bad: true},
		{name: "window missing", in: "30/", bad: true},
		{name: "window zero", in: "30/0s", bad: true},
		{name: "window negative", in: "30/-1m", bad: true},
		{name: "window below a millisecond", in: "30/10us", bad: true},
		{name: "window not whole milliseconds", in: "30/1500us", bad: true},
		{name: "window over a year", in: "30/9000h", bad: true},
		{name: "garbage unit", in: "30/1parsec", bad: true},
		{name: "two slashes", in: "30/1m/2", bad: true},
		{name: "the product is Validate's (it depends on the algorithm)", in: "1000000/8784h", count: 1000000, window: 8784 * time.Hour},
		{name: "overflowing count", in: "99999999999999999999/1m", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count, window, err := ParseRate(tt.in)
			if tt.bad {
				if err == nil {
					t.Fatalf("ParseRate(%q) = %d, %s; want an error", tt.in, count, window)
				}
				if !strings.Contains(err.Error(), "rate ") {
					t.Errorf("error %q does not say what was parsed", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRate(%q): %v", tt.in, err)
			}
			if count != tt.count || window != tt.window {
				t.Fatalf("ParseRate(%q) = %d, %s; want %d, %s", tt.in, count, window, tt.count, tt.window)
			}
		})
	}
}
