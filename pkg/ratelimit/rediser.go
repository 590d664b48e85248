package ratelimit

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// rediser is what a Limiter uses of a go-redis client: the commands its
// decisions, resets and live controls send, and nothing else. Every go-redis
// v9 client has them (*redis.Client, *redis.ClusterClient, *redis.Ring,
// redis.UniversalClient), so NewLimiter takes any of them, and a test may
// hand it a wrapper of its own.
type rediser interface {
	// Process sends the decision and concurrency scripts (EVALSHA, then
	// EVAL on NOSCRIPT), as commands go-redis never retries.
	Process(ctx context.Context, cmd redis.Cmder) error
	// ScriptLoad preloads the scripts (LoadScripts).
	scriptLoader
	// Pipelined sends a Reset's deletions and a listing's reads.
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	// TxPipelined reads and deletes a network control at once.
	TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	// HGetAll reads the network-controls hash (the control watch).
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	// Get, GetDel and SetArgs read, lift and set an identity's control.
	Get(ctx context.Context, key string) *redis.StringCmd
	GetDel(ctx context.Context, key string) *redis.StringCmd
	SetArgs(ctx context.Context, key string, value any, a redis.SetArgs) *redis.StatusCmd
	// ZRangeArgs lists the identity controls in force.
	ZRangeArgs(ctx context.Context, z redis.ZRangeArgs) *redis.StringSliceCmd
	// Time is Redis's clock, for the controls' ends.
	Time(ctx context.Context) *redis.TimeCmd
}

// scriptLoader loads a script into one node's script cache.
type scriptLoader interface {
	ScriptLoad(ctx context.Context, script string) *redis.StringCmd
}

// The clients a Limiter is documented to take.
var (
	_ rediser = (*redis.Client)(nil)
	_ rediser = (*redis.ClusterClient)(nil)
	_ rediser = (*redis.Ring)(nil)
	_ rediser = redis.UniversalClient(nil)
)
