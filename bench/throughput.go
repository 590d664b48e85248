package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// throughputRun is one contender at one concurrency for one round.
type throughputRun struct {
	PerSecond float64   `json:"decisions_per_second"`
	P50us     float64   `json:"p50_us"`
	P99us     float64   `json:"p99_us"`
	Cost      redisCost `json:"redis"`
	Errors    int64     `json:"errors"`
	// ClientCPUus is this process's CPU time (user+system, from getrusage)
	// per decision; RedisCPUus is redis-server's (INFO cpu), I/O included.
	ClientCPUus float64 `json:"client_cpu_us_per_decision"`
	RedisCPUus  float64 `json:"redis_cpu_us_per_decision"`
}

// throughputResult summarises the rounds of one contender at one
// concurrency: medians, and the spread as min and max.
type throughputResult struct {
	Concurrency int             `json:"concurrency"`
	Rounds      []throughputRun `json:"rounds"`
	Median      throughputRun   `json:"median"`
	MinPerSec   float64         `json:"min_decisions_per_second"`
	MaxPerSec   float64         `json:"max_decisions_per_second"`
}

// runThroughput measures one contender at one concurrency for d, on a pool
// of identities, with Redis's own clock (production mode).
func runThroughput(ctx context.Context, b *bench, c *contender, conc int, d time.Duration) (throughputRun, error) {
	decide, err := c.build(nil, b.cfg.throughputLimit)
	if err != nil {
		return throughputRun{}, fmt.Errorf("%s: build: %w", c.Name, err)
	}
	// Warm the connections and the script cache outside the measurement.
	for i := 0; i < conc; i++ {
		if _, err := decide(ctx, b.ids[i%len(b.ids)]); err != nil {
			return throughputRun{}, fmt.Errorf("%s: warm-up: %w", c.Name, err)
		}
	}
	if err := b.stats.ConfigResetStat(ctx).Err(); err != nil {
		return throughputRun{}, fmt.Errorf("config resetstat: %w", err)
	}
	b.hook.reset()
	cpu0 := processCPU()
	rcpu0, err := redisCPU(ctx, b.stats)
	if err != nil {
		return throughputRun{}, err
	}

	lat := make([][]int64, conc)
	counts := make([]int64, conc)
	errs := make([]int64, conc)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 42))
			own := make([]int64, 0, 1<<14)
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if _, err := decide(ctx, b.ids[r.IntN(len(b.ids))]); err != nil {
					errs[g]++
					continue
				}
				own = append(own, int64(time.Since(t0)))
			}
			lat[g] = own
			counts[g] = int64(len(own))
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := processCPU()
	rcpu1, err := redisCPU(ctx, b.stats)
	if err != nil {
		return throughputRun{}, err
	}
	trips := b.hook.trips.Load()
	sent := b.hook.sent()
	stats, err := commandStats(ctx, b.stats)
	if err != nil {
		return throughputRun{}, err
	}

	var all []int64
	var n, nerr int64
	for g := range lat {
		all = append(all, lat[g]...)
		n += counts[g]
		nerr += errs[g]
	}
	slices.Sort(all)
	return throughputRun{
		PerSecond:   float64(n) / elapsed.Seconds(),
		P50us:       percentile(all, 0.50) / 1e3,
		P99us:       percentile(all, 0.99) / 1e3,
		Cost:        costOf(stats, sent, n+nerr, trips),
		Errors:      nerr,
		ClientCPUus: float64((cpu1 - cpu0).Microseconds()) / float64(max(1, n+nerr)),
		RedisCPUus:  (rcpu1 - rcpu0) * 1e6 / float64(max(1, n+nerr)),
	}, nil
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is redis-server's user and system CPU seconds so far.
func redisCPU(ctx context.Context, c *redis.Client) (float64, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("info cpu: %w", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("info cpu %s=%q: %w", k, v, err)
			}
			total += f
		}
	}
	return total, nil
}

func percentile(sorted []int64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return float64(sorted[i])
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summarise(conc int, rounds []throughputRun) throughputResult {
	pick := func(f func(throughputRun) float64) []float64 {
		out := make([]float64, len(rounds))
		for i, r := range rounds {
			out[i] = f(r)
		}
		return out
	}
	per := pick(func(r throughputRun) float64 { return r.PerSecond })
	var errs int64
	for _, r := range rounds {
		errs += r.Errors
	}
	return throughputResult{
		Concurrency: conc,
		Rounds:      rounds,
		Median: throughputRun{
			PerSecond: median(per),
			P50us:     median(pick(func(r throughputRun) float64 { return r.P50us })),
			P99us:     median(pick(func(r throughputRun) float64 { return r.P99us })),
			Cost: redisCost{
				UsecPerDecision:     median(pick(func(r throughputRun) float64 { return r.Cost.UsecPerDecision })),
				CommandsPerDecision: median(pick(func(r throughputRun) float64 { return r.Cost.CommandsPerDecision })),
				TripsPerDecision:    median(pick(func(r throughputRun) float64 { return r.Cost.TripsPerDecision })),
			},
			Errors:      errs,
			ClientCPUus: median(pick(func(r throughputRun) float64 { return r.ClientCPUus })),
			RedisCPUus:  median(pick(func(r throughputRun) float64 { return r.RedisCPUus })),
		},
		MinPerSec: slices.Min(per),
		MaxPerSec: slices.Max(per),
	}
}
