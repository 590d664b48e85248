package main

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

//go:embed lua/*.lua
var baselineLua embed.FS

// limitSpec is the budget every contender enforces in one measurement.
type limitSpec struct {
	Count  int64
	Window time.Duration
}

// decider makes one decision of cost 1 for identity.
type decider func(ctx context.Context, identity string) (bool, error)

// Time control: how a contender learns the time, which decides how
// precisely the attacks and the replay can place its requests.
const (
	clockInjected = "injected (Options.Now / ARGV)"
	clockClient   = "client timestamp (ARGV)"
	clockRedis    = "Redis TIME (not controllable)"
	clockTTL      = "key TTL in Redis (not controllable)"
	clockNone     = "-"
)

// contender is one rate limiter (or ceiling) under test.
type contender struct {
	Name  string
	Group string // slidegate, peer, baseline, ceiling
	Clock string
	// build returns a decider for lim. now is the virtual clock for
	// contenders whose time can be controlled, nil for real time.
	build func(now func() time.Time, lim limitSpec) (decider, error)
	// replay, when set, queues one decision at an explicit time on a
	// pipeline: the accuracy trace and the memory fill go through it.
	replay func(ctx context.Context, pipe redis.Pipeliner, identity string, lim limitSpec, nowUs int64) *redis.Cmd
	// keyOf is the key (or key prefix) the contender keeps for identity.
	keyOf func(identity string, lim limitSpec) string
	// Virtual reports whether build honours the virtual clock.
	Virtual bool
	// buildGate, for slidegate's algorithms, decides through a
	// ratelimit.Gate (deny cache on unless denyCacheOff).
	buildGate func(now func() time.Time, lim limitSpec, denyCacheOff bool) (decider, error)
	// memoryFill, when set, is the memory phase's request for a contender
	// without replay whose key would otherwise expire during the fill (see
	// runMemory).
	memoryFill func(lim limitSpec) (decider, error)
}

// identityTag hashes an identity the way pkg/ratelimit does (SHA-256, 128
// bits, unpadded base64url), so that every contender's keys carry a tag of
// the same length and no raw identity reaches Redis.
func identityTag(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// slidegateKey is the key pkg/ratelimit builds for the limit named "bench"
// (see pkg/ratelimit/keys.go); the replay uses it so that the memory figures
// are those of real keys. The counters (sw, fw) end in "<count>/<window>",
// the other algorithms in "<count>:<window ms>".
func slidegateKey(code, identity string, lim limitSpec) string {
	head := "rl:{" + identityTag(identity) + "}:" + code + ":bench:" + strconv.FormatInt(lim.Count, 10)
	if code == "sw" || code == "fw" {
		return head + "/" + compactWindow(lim.Window)
	}
	return head + ":" + strconv.FormatInt(lim.Window.Milliseconds(), 10)
}

// compactWindow writes a window as pkg/ratelimit's keys do: "1m", "1h",
// "10s", "250ms".
func compactWindow(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}

// redisRateKey is what redis_rate is given as its key (it prepends
// "rate:"): the identity's tag and the limit, padded so that the whole key
// is as long as slidegate's default key, so that memory compares at equal
// key length.
func redisRateKey(identity string, lim limitSpec) string {
	k := "{" + identityTag(identity) + "}:bench:" + strconv.FormatInt(lim.Count, 10) + "/" + compactWindow(lim.Window)
	want := len(slidegateKey("sw", identity, lim)) - len("rate:")
	for len(k) < want {
		k += "_"
	}
	return k[:want]
}

func isAllowedReply(v any) bool {
	switch r := v.(type) {
	case []any:
		return len(r) > 0 && r[0] == int64(1)
	case int64:
		return r == 1
	}
	return false
}

// slidegateScripts gives, for each of pkg/ratelimit's algorithms, the code
// it puts in its keys (pkg/ratelimit/keys.go) and its script file. Decisions
// go through Limiter and Gate; only the accuracy replay and the memory fill,
// which need many decisions at explicit instants on one pipeline, run the
// script by EVALSHA with the Limiter's KEYS and ARGV.
//
// The fixed window has no script of its own: sliding_window.lua decides it
// when told fixed (its first vararg), as the mixed script runs it; the
// replay wraps the file in a function called so.
var slidegateScripts = map[ratelimit.Algorithm]struct {
	code, file string
	fixed      bool
}{
	ratelimit.SlidingWindow:  {"sw", "sliding_window.lua", false},
	ratelimit.SlidingLog:     {"sl", "sliding_log.lua", false},
	ratelimit.TokenBucket:    {"tb", "gcra.lua", false},
	ratelimit.LeakyBucket:    {"lb", "gcra.lua", false},
	ratelimit.FixedWindow:    {"fw", "sliding_window.lua", true},
	ratelimit.SlidingBuckets: {"sb", "sliding_buckets.lua", false},
}

// loadContenders builds every contender on client: one per algorithm in
// ratelimit.Algorithms() (each once), then the peers, baselines and ceilings.
// luaDir is pkg/ratelimit/lua of the checkout, which the replay reads.
func loadContenders(ctx context.Context, client *redis.Client, luaDir string) ([]*contender, error) {
	var out []*contender

	for _, alg := range ratelimit.Algorithms() {
		s, ok := slidegateScripts[alg]
		if !ok {
			return nil, fmt.Errorf("algorithm %q has no entry in slidegateScripts (bench/contenders.go): add its key code and script file", alg)
		}
		src, err := os.ReadFile(filepath.Join(luaDir, s.file))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", s.file, err)
		}
		if s.fixed {
			src = []byte("return (function(...)\n" + string(src) + "\nend)(true)\n")
		}
		sc := redis.NewScript(string(src))
		if err := sc.Load(ctx, client).Err(); err != nil {
			return nil, fmt.Errorf("load %s: %w", s.file, err)
		}
		code := s.code
		limitOf := func(lim limitSpec) ratelimit.Limit {
			return ratelimit.Limit{Name: "bench", Count: lim.Count, Window: lim.Window, Algorithm: alg}
		}
		out = append(out, &contender{
			Name: "slidegate " + string(alg), Group: "slidegate", Clock: clockInjected, Virtual: true,
			build: func(now func() time.Time, lim limitSpec) (decider, error) {
				l, err := ratelimit.NewLimiter(client, ratelimit.Options{Now: now})
				if err != nil {
					return nil, err
				}
				if err := l.LoadScripts(ctx); err != nil {
					return nil, err
				}
				limit := limitOf(lim)
				return func(ctx context.Context, id string) (bool, error) {
					res, err := l.Decide(ctx, 1, ratelimit.Check{Identity: id, Limit: limit})
					return res.Allowed, err
				}, nil
			},
			buildGate: func(now func() time.Time, lim limitSpec, denyCacheOff bool) (decider, error) {
				l, err := ratelimit.NewLimiter(client, ratelimit.Options{Now: now})
				if err != nil {
					return nil, err
				}
				g := ratelimit.NewGate(l, ratelimit.GateOptions{DenyCacheDisabled: denyCacheOff})
				check := ratelimit.Check{Limit: limitOf(lim)}
				return func(ctx context.Context, id string) (bool, error) {
					c := check
					c.Identity = id
					res, err := g.Decide(ctx, 1, ratelimit.FailOpen, c)
					return res.Allowed, err
				}, nil
			},
			replay: func(ctx context.Context, pipe redis.Pipeliner, id string, lim limitSpec, nowUs int64) *redis.Cmd {
				// ARGV: cost, count, window in microseconds, the burst for
				// GCRA, then the time (see the scripts' headers).
				args := []any{1, lim.Count, lim.Window.Microseconds()}
				if alg == ratelimit.TokenBucket || alg == ratelimit.LeakyBucket {
					args = append(args, limitOf(lim).Burst())
				}
				return sc.EvalSha(ctx, pipe, []string{slidegateKey(code, id, lim)}, append(args, nowUs)...)
			},
			keyOf: func(id string, lim limitSpec) string { return slidegateKey(code, id, lim) },
		})
	}

	out = append(out, &contender{
		Name: "redis_rate v10 (GCRA)", Group: "peer", Clock: clockRedis,
		build: func(_ func() time.Time, lim limitSpec) (decider, error) {
			rl := redis_rate.NewLimiter(client)
			limit := redis_rate.Limit{Rate: int(lim.Count), Burst: int(lim.Count), Period: lim.Window}
			return func(ctx context.Context, id string) (bool, error) {
				res, err := rl.Allow(ctx, redisRateKey(id, lim), limit)
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			}, nil
		},
		keyOf: func(id string, lim limitSpec) string { return "rate:" + redisRateKey(id, lim) },
		// One request leaves a GCRA key that lives one emission interval
		// (36 s at 100/1h), less than a fill of 200,000 identities takes
		// on a loaded machine; the whole burst at once leaves the same one
		// key (a timestamp) living the window, as slidegate's keys do.
		memoryFill: func(lim limitSpec) (decider, error) {
			rl := redis_rate.NewLimiter(client)
			limit := redis_rate.Limit{Rate: int(lim.Count), Burst: int(lim.Count), Period: lim.Window}
			return func(ctx context.Context, id string) (bool, error) {
				res, err := rl.AllowN(ctx, redisRateKey(id, lim), limit, int(lim.Count))
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			}, nil
		},
	})

	store, err := ulredis.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: "ul"})
	if err != nil {
		return nil, fmt.Errorf("ulule store: %w", err)
	}
	out = append(out, &contender{
		Name: "ulule/limiter v3 (redis)", Group: "peer", Clock: clockTTL,
		build: func(_ func() time.Time, lim limitSpec) (decider, error) {
			l := limiter.New(store, limiter.Rate{Period: lim.Window, Limit: lim.Count})
			return func(ctx context.Context, id string) (bool, error) {
				c, err := l.Get(ctx, identityTag(id))
				return err == nil && !c.Reached, err
			}, nil
		},
		keyOf: func(id string, _ limitSpec) string { return "ul:" + identityTag(id) },
	})

	twoSrc, _ := baselineLua.ReadFile("lua/two_key_counter.lua")
	twoKey := redis.NewScript(string(twoSrc))
	if err := twoKey.Load(ctx, client).Err(); err != nil {
		return nil, fmt.Errorf("load two_key_counter.lua: %w", err)
	}
	out = append(out, &contender{
		Name: "baseline two-key counter", Group: "baseline", Clock: clockClient + ", seconds", Virtual: true,
		build: func(now func() time.Time, lim limitSpec) (decider, error) {
			if now == nil {
				now = time.Now
			}
			return func(ctx context.Context, id string) (bool, error) {
				v, err := twoKey.Run(ctx, client, []string{"tk:" + identityTag(id)},
					now().Unix(), int64(lim.Window/time.Second), lim.Count).Result()
				return isAllowedReply(v), err
			}, nil
		},
		replay: func(ctx context.Context, pipe redis.Pipeliner, id string, lim limitSpec, nowUs int64) *redis.Cmd {
			return twoKey.EvalSha(ctx, pipe, []string{"tk:" + identityTag(id)},
				nowUs/1_000_000, int64(lim.Window/time.Second), lim.Count)
		},
		keyOf: func(id string, _ limitSpec) string { return "tk:" + identityTag(id) + ":*" },
	})

	logSrc, _ := baselineLua.ReadFile("lua/zset_log.lua")
	zlog := redis.NewScript(string(logSrc))
	if err := zlog.Load(ctx, client).Err(); err != nil {
		return nil, fmt.Errorf("load zset_log.lua: %w", err)
	}
	var seq atomic.Int64
	out = append(out, &contender{
		Name: "baseline zset log", Group: "baseline", Clock: clockClient + ", milliseconds", Virtual: true,
		build: func(now func() time.Time, lim limitSpec) (decider, error) {
			if now == nil {
				now = time.Now
			}
			return func(ctx context.Context, id string) (bool, error) {
				v, err := zlog.Run(ctx, client, []string{"zl:" + identityTag(id)},
					now().UnixMilli(), lim.Window.Milliseconds(), lim.Count, seq.Add(1)).Result()
				return isAllowedReply(v), err
			}, nil
		},
		replay: func(ctx context.Context, pipe redis.Pipeliner, id string, lim limitSpec, nowUs int64) *redis.Cmd {
			return zlog.EvalSha(ctx, pipe, []string{"zl:" + identityTag(id)},
				nowUs/1000, lim.Window.Milliseconds(), lim.Count, seq.Add(1))
		},
		keyOf: func(id string, _ limitSpec) string { return "zl:" + identityTag(id) },
	})

	incrSrc, _ := baselineLua.ReadFile("lua/incr_pexpire.lua")
	incr := redis.NewScript(string(incrSrc))
	if err := incr.Load(ctx, client).Err(); err != nil {
		return nil, fmt.Errorf("load incr_pexpire.lua: %w", err)
	}
	out = append(out, &contender{
		Name: nameIncrPexpire, Group: "ceiling", Clock: clockClient + ", milliseconds",
		build: func(_ func() time.Time, lim limitSpec) (decider, error) {
			window := lim.Window.Milliseconds()
			return func(ctx context.Context, id string) (bool, error) {
				index := time.Now().UnixMilli() / window
				v, err := incr.EvalSha(ctx, client, []string{"fx:{" + identityTag(id) + "}:" + strconv.FormatInt(index, 10)}, window).Int64()
				return err == nil && v <= lim.Count, err
			}, nil
		},
	})
	timeSrc, _ := baselineLua.ReadFile("lua/time_only.lua")
	timeOnly := redis.NewScript(string(timeSrc))
	if err := timeOnly.Load(ctx, client).Err(); err != nil {
		return nil, fmt.Errorf("load time_only.lua: %w", err)
	}
	out = append(out, &contender{
		Name: "ceiling: EVALSHA of TIME", Group: "ceiling", Clock: clockRedis,
		build: func(_ func() time.Time, _ limitSpec) (decider, error) {
			return func(ctx context.Context, _ string) (bool, error) {
				return true, timeOnly.EvalSha(ctx, client, nil).Err()
			}, nil
		},
	})

	one := redis.NewScript("return 1")
	if err := one.Load(ctx, client).Err(); err != nil {
		return nil, fmt.Errorf("load ceiling script: %w", err)
	}
	out = append(out, &contender{
		Name: "ceiling: EVALSHA return 1", Group: "ceiling", Clock: clockNone,
		build: func(_ func() time.Time, _ limitSpec) (decider, error) {
			return func(ctx context.Context, _ string) (bool, error) {
				v, err := one.EvalSha(ctx, client, nil).Result()
				return v == int64(1), err
			}, nil
		},
	})
	out = append(out, &contender{
		Name: "ceiling: PING", Group: "ceiling", Clock: clockNone,
		build: func(_ func() time.Time, _ limitSpec) (decider, error) {
			return func(ctx context.Context, _ string) (bool, error) {
				return true, client.Ping(ctx).Err()
			}, nil
		},
	})
	return out, nil
}
