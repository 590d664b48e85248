package observe

import (
	"context"
	"fmt"
	"log/slog"
)

// RedisLog adapts a slog.Logger to go-redis's logger, so that the client's
// own messages (failed dials, pool events) are JSON lines like every other
// log line of the function. go-redis keeps its logger in a package
// variable: install it once, in main, with redis.SetLogger(observe.RedisLog{L: logger}).
type RedisLog struct {
	// L receives the messages at Warn level.
	L *slog.Logger
}

// Printf implements go-redis's logging interface.
func (r RedisLog) Printf(ctx context.Context, format string, v ...any) {
	r.L.LogAttrs(ctx, slog.LevelWarn, "redis client", slog.String("detail", fmt.Sprintf(format, v...)))
}
