package instance

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestLogLevel(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    slog.Level
		wantErr string // substring of the error; "" for none
	}{
		{"unset: info", nil, slog.LevelInfo, ""},
		{"debug", map[string]string{"LOG_LEVEL": "debug"}, slog.LevelDebug, ""},
		{"any case, spaces around", map[string]string{"LOG_LEVEL": " DEBUG "}, slog.LevelDebug, ""},
		{"info", map[string]string{"LOG_LEVEL": "info"}, slog.LevelInfo, ""},
		{"warn", map[string]string{"LOG_LEVEL": "warn"}, slog.LevelWarn, ""},
		{"warning", map[string]string{"LOG_LEVEL": "Warning"}, slog.LevelWarn, ""},
		{"error", map[string]string{"LOG_LEVEL": "error"}, slog.LevelError, ""},
		{"Lambda's level when LOG_LEVEL is unset", map[string]string{"AWS_LAMBDA_LOG_LEVEL": "DEBUG"}, slog.LevelDebug, ""},
		{"Lambda's TRACE is debug", map[string]string{"AWS_LAMBDA_LOG_LEVEL": "TRACE"}, slog.LevelDebug, ""},
		{"Lambda's FATAL is error", map[string]string{"AWS_LAMBDA_LOG_LEVEL": "FATAL"}, slog.LevelError, ""},
		{"LOG_LEVEL wins over Lambda's", map[string]string{"LOG_LEVEL": "error", "AWS_LAMBDA_LOG_LEVEL": "DEBUG"}, slog.LevelError, ""},
		{"bad value: info, and an error naming variable, value and default", map[string]string{"LOG_LEVEL": "verbose"}, slog.LevelInfo, `LOG_LEVEL="verbose": want debug, info, warn or error; using info`},
		{"bad Lambda value names Lambda's variable", map[string]string{"AWS_LAMBDA_LOG_LEVEL": "loud"}, slog.LevelInfo, `AWS_LAMBDA_LOG_LEVEL="loud"`},
		{"a level offset is not a level", map[string]string{"LOG_LEVEL": "info+2"}, slog.LevelInfo, `LOG_LEVEL="info+2"`},
		{"a long bad value is clipped", map[string]string{"LOG_LEVEL": strings.Repeat("x", 300)}, slog.LevelInfo, `..."`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LogLevel(func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Errorf("level %v, want %v", got, tc.want)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if err != nil && len(err.Error()) > 120 {
				t.Errorf("error of %d bytes: the value is not clipped", len(err.Error()))
			}
		})
	}
}

// TestNewLoggerReportsABadLevel: a bad LOG_LEVEL never crashes and never
// silences: the logger runs at info, and says so on its first line.
func TestNewLoggerReportsABadLevel(t *testing.T) {
	var out bytes.Buffer
	logger := NewLogger(context.Background(), &out, func(k string) string {
		return map[string]string{"LOG_LEVEL": "chatty"}[k]
	})
	logger.Debug("hidden")
	logger.Info("shown")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want the configuration error and the info line, got:\n%s", out.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("not JSON: %s", lines[0])
	}
	if first["level"] != "ERROR" || first["msg"] != "bad configuration value" || !strings.Contains(first["error"].(string), `LOG_LEVEL="chatty"`) {
		t.Errorf("configuration error line: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"msg":"shown"`) {
		t.Errorf("second line: %s", lines[1])
	}
}
