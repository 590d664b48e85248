package instance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/slidegate/slidegate/internal/truncate"
)

// Log level configuration.
const (
	// LogLevelVariable is the environment variable of a function's log
	// level: debug, info, warn or error.
	LogLevelVariable = "LOG_LEVEL"
	// LambdaLogLevelVariable is set by Lambda's advanced logging controls
	// (the function's LoggingConfig.ApplicationLogLevel: TRACE, DEBUG, INFO,
	// WARN, ERROR or FATAL). It is read when LOG_LEVEL is unset.
	LambdaLogLevelVariable = "AWS_LAMBDA_LOG_LEVEL"
	// DefaultLogLevel is the level when neither variable is set, or when
	// the one that is set does not parse: allowed decisions (Debug) are
	// not logged, everything else is.
	DefaultLogLevel = slog.LevelInfo
)

// LogLevel reads a function's log level from LOG_LEVEL, or when that is
// unset from AWS_LAMBDA_LOG_LEVEL: "debug", "info", "warn" (or "warning")
// and "error", in any case, plus Lambda's "trace" (as debug) and "fatal"
// (as error). With neither set it is DefaultLogLevel. A value that does not
// parse gives DefaultLogLevel and an error that names the variable, the
// value and the level used; bad configuration never silences the log.
func LogLevel(getenv func(string) string) (slog.Level, error) {
	name := LogLevelVariable
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		name = LambdaLogLevelVariable
		v = strings.TrimSpace(getenv(name))
	}
	if v == "" {
		return DefaultLogLevel, nil
	}
	switch strings.ToLower(v) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "fatal":
		return slog.LevelError, nil
	}
	return DefaultLogLevel, fmt.Errorf("%s=%q: want debug, info, warn or error; using %s",
		name, truncate.Text(v, 32), strings.ToLower(DefaultLogLevel.String()))
}

// NewLogger returns a function's logger: JSON lines on w, at the level
// LogLevel reads from getenv (os.Getenv in main). A level that does not
// parse is logged on the new logger as a configuration error, like every
// other bad configuration value, and the default level is used.
func NewLogger(ctx context.Context, w io.Writer, getenv func(string) string) *slog.Logger {
	level, err := LogLevel(getenv)
	logger := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	logConfigErrors(ctx, logger, err)
	return logger
}
