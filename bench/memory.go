package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// memoryResult is Redis memory per active identity.
type memoryResult struct {
	Identities       int     `json:"identities"`
	BytesPerIdentity float64 `json:"bytes_per_identity"`
	KeysPerIdentity  float64 `json:"keys_per_identity"`
	KeyExample       string  `json:"key_example"`
	KeyBytes         int     `json:"key_bytes"`
	// MemoryUsage is MEMORY USAGE of one identity's key (for the two-key
	// baseline, of its current window's key).
	MemoryUsage int64  `json:"memory_usage_one_key"`
	Method      string `json:"method"`
}

// runMemory fills Redis with n identities, each active on both sides of a
// window boundary (one request W/10 before it, one W/10 after), so that a
// design keeping two windows holds both, and reports the growth of
// used_memory per identity. Contenders with a controllable clock are
// replayed through their scripts at those exact times; the peers, whose
// time cannot be set, make one request per identity (memoryFill's, when
// the contender has one, so that its key outlives the fill).
func runMemory(ctx context.Context, b *bench, c *contender, n int) (memoryResult, error) {
	lim := b.cfg.memoryLimit
	if err := b.stats.FlushAll(ctx).Err(); err != nil {
		return memoryResult{}, fmt.Errorf("flushall: %w", err)
	}
	before, err := infoField(ctx, b.stats, "memory", "used_memory")
	if err != nil {
		return memoryResult{}, err
	}
	boundary := alignedBase(lim.Window).Add(10 * lim.Window)
	method := "replayed through its script at boundary-W/10 and boundary+W/10"
	if c.replay != nil {
		times := []int64{
			boundary.Add(-lim.Window / 10).UnixMicro(),
			boundary.Add(lim.Window / 10).UnixMicro(),
		}
		err = parallel(4, n, func(lo, hi int) error {
			pipe := b.client.Pipeline()
			for _, at := range times {
				for i := lo; i < hi; i++ {
					c.replay(ctx, pipe, memoryIdentity(i), lim, at)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					return fmt.Errorf("%s: memory fill: %w", c.Name, err)
				}
			}
			return nil
		})
	} else {
		method = "one live request per identity through its API (real time)"
		build := func(lim limitSpec) (decider, error) { return c.build(nil, lim) }
		if c.memoryFill != nil {
			method = "one live request per identity through its API (real time), spending the whole limit so that the key lives the window"
			build = c.memoryFill
		}
		decide, berr := build(lim)
		if berr != nil {
			return memoryResult{}, berr
		}
		err = parallel(64, n, func(lo, hi int) error {
			for i := lo; i < hi; i++ {
				if _, err := decide(ctx, memoryIdentity(i)); err != nil {
					return fmt.Errorf("%s: memory fill: %w", c.Name, err)
				}
			}
			return nil
		})
	}
	if err != nil {
		return memoryResult{}, err
	}
	after, err := infoField(ctx, b.stats, "memory", "used_memory")
	if err != nil {
		return memoryResult{}, err
	}
	keys, err := b.stats.DBSize(ctx).Result()
	if err != nil {
		return memoryResult{}, fmt.Errorf("dbsize: %w", err)
	}
	example := ""
	var usage int64
	if c.keyOf != nil {
		example = c.keyOf(memoryIdentity(0), lim)
		probe := example
		if strings.HasSuffix(probe, "*") {
			found, err := b.stats.Keys(ctx, probe).Result()
			if err == nil && len(found) > 0 {
				slices.Sort(found)
				probe = found[len(found)-1]
			}
		}
		usage, _ = b.stats.MemoryUsage(ctx, probe).Result()
	}
	res := memoryResult{
		Identities:       n,
		BytesPerIdentity: float64(after-before) / float64(n),
		KeysPerIdentity:  float64(keys) / float64(n),
		KeyExample:       example,
		KeyBytes:         len(strings.TrimSuffix(example, ":*")),
		MemoryUsage:      usage,
		Method:           method,
	}
	if err := b.stats.FlushAll(ctx).Err(); err != nil {
		return memoryResult{}, fmt.Errorf("flushall: %w", err)
	}
	return res, nil
}

func memoryIdentity(i int) string { return fmt.Sprintf("mem-%07d", i) }

// alignedBase is a fixed virtual instant aligned to window, so that fixed
// windows, the counter's windows and the buckets all start on it.
func alignedBase(window time.Duration) time.Time {
	const epoch = int64(1_800_000_000_000_000) // microseconds, 2027-01-15
	w := window.Microseconds()
	return time.UnixMicro(epoch - epoch%w)
}

// parallel splits [0, n) into chunks of 1000 and runs them on workers
// goroutines.
func parallel(workers, n int, f func(lo, hi int) error) error {
	return parallelChunks(workers, n, 1000, f)
}

// parallelChunks runs f on chunks of [0, n) on workers goroutines and
// returns the first error.
func parallelChunks(workers, n, chunk int, f func(lo, hi int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if first != nil || next >= n {
					mu.Unlock()
					return
				}
				lo := next
				next = min(n, next+chunk)
				hi := next
				mu.Unlock()
				if err := f(lo, hi); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
