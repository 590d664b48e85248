package ctlstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit/internal/keys"
)

// Client is what the admin calls use of a go-redis client: a Limiter's
// client has every command of it.
type Client interface {
	HashReader
	// Process sends the admin scripts (EVALSHA, then EVAL on NOSCRIPT).
	Process(ctx context.Context, cmd redis.Cmder) error
	// Pipelined sends a listing's reads.
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	// TxPipelined reads and deletes a network control at once.
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	// Get, GetDel and SetArgs read, lift and set an identity's control.
	Get(ctx context.Context, key string) *redis.StringCmd
	GetDel(ctx context.Context, key string) *redis.StringCmd
	SetArgs(ctx context.Context, key string, value any, a redis.SetArgs) *redis.StatusCmd
	// ZRangeArgs lists the identity controls in force.
	ZRangeArgs(ctx context.Context, z redis.ZRangeArgs) *redis.StringSliceCmd
	// Time is Redis's clock, for the controls' ends.
	Time(ctx context.Context) *redis.TimeCmd
}

// Config is what a Limiter shares with the admin calls of package
// controls: its client, its keys, its Options.Timeout and Options.Now,
// and its control watch.
type Config struct {
	Client  Client
	Keys    keys.Space
	Timeout time.Duration
	Now     func() time.Time
	Watch   *Watch
}

// Handle carries a Config into package controls, whose Store is defined
// as a Handle: a Limiter converts the Handle it makes into a
// *controls.Store, and the Store reads its Config back, with no exported
// field or constructor for anyone else.
type Handle struct{ cfg *Config }

// NewHandle returns a Handle of cfg.
func NewHandle(cfg *Config) *Handle { return &Handle{cfg: cfg} }

// Config is the Handle's Config.
func (h *Handle) Config() *Config { return h.cfg }
