package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// plansConcurrency is the one client concurrency of the several-limits
// section: enough goroutines to keep Redis busy, few enough that the client
// on a small machine does not drown the differences.
const plansConcurrency = 16

// plansInfo is the "Several limits per decision" section: what one decision
// costs when it carries one limit, three limits, or limits of two
// algorithms, all through Limiter.Decide on one identity.
type plansInfo struct {
	Date          string `json:"date"`
	LoadBefore    string `json:"loadavg_before"`
	LoadAfter     string `json:"loadavg_after"`
	Concurrency   int    `json:"concurrency"`
	Rounds        int    `json:"rounds"`
	RoundDuration string `json:"round_duration"`
	Identities    int    `json:"identities"`
	// MeasuredAlone is set by -only plans: the section is newer than the
	// rest of the report.
	MeasuredAlone bool       `json:"measured_alone,omitempty"`
	Cases         []planCase `json:"cases"`
	// MemoryOne and MemoryThree are used_memory per identity after one
	// decision of the one-limit and the three-limit plan for each of
	// MemoryIdentities identities (runPlanMemory).
	MemoryOne        float64 `json:"memory_one_limit_bytes,omitempty"`
	MemoryThree      float64 `json:"memory_three_limits_bytes,omitempty"`
	MemoryIdentities int     `json:"memory_identities,omitempty"`
}

// runPlanMemory measures what one identity's state costs Redis for the
// one-limit and the three-limit plan: used_memory before and after one
// decision of the plan for each of n identities, on an emptied Redis.
func runPlanMemory(ctx context.Context, b *bench, info *plansInfo, n int) error {
	lim, err := ratelimit.NewLimiter(b.client, ratelimit.Options{})
	if err != nil {
		return fmt.Errorf("plan memory: %w", err)
	}
	shapes := planShapes()
	for _, s := range []struct {
		shape planShape
		out   *float64
	}{{shapes[0], &info.MemoryOne}, {shapes[1], &info.MemoryThree}} {
		if err := b.stats.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("plan memory: flushall: %w", err)
		}
		before, err := infoField(ctx, b.stats, "memory", "used_memory")
		if err != nil {
			return err
		}
		err = parallel(64, n, func(lo, hi int) error {
			for i := lo; i < hi; i++ {
				if _, err := lim.Decide(ctx, 1, s.shape.checks(memoryIdentity(i))...); err != nil {
					return fmt.Errorf("plan memory: %s: %w", s.shape.name, err)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		after, err := infoField(ctx, b.stats, "memory", "used_memory")
		if err != nil {
			return err
		}
		*s.out = float64(after-before) / float64(n)
	}
	info.MemoryIdentities = n
	return b.stats.FlushAll(ctx).Err()
}

// planCase is one shape of decision and its figures.
type planCase struct {
	Name   string `json:"name"`
	Limits string `json:"limits"`
	Script string `json:"script"`
	// Throughput holds every round at plansConcurrency and their medians.
	Throughput throughputResult `json:"throughput"`
	// Denied counts decisions a limit refused during the rounds: the
	// limits are set so that (almost) every decision admits and writes.
	Denied    int64 `json:"denied"`
	Decisions int64 `json:"decisions"`
	// Allocs and AllocBytes are heap allocations per Limiter.Decide in
	// this process, go-redis included, from runtime.MemStats.
	Allocs     float64 `json:"allocs_per_decision"`
	AllocBytes float64 `json:"alloc_bytes_per_decision"`
	// CommandsByName is every command Redis executed during the rounds
	// (inside scripts included), per decision, by lower-case name; a
	// decision is one EVALSHA.
	CommandsByName map[string]float64 `json:"commands_by_name_per_decision"`
}

// planShape is a decision to measure: its checks, built per identity.
type planShape struct {
	name, script string
	limits       []ratelimit.Limit
}

func (s planShape) checks(identity string) []ratelimit.Check {
	out := make([]ratelimit.Check, len(s.limits))
	for i, l := range s.limits {
		out[i] = ratelimit.Check{Identity: identity, Limit: l}
	}
	return out
}

func (s planShape) limitList() string {
	var parts []string
	for _, l := range s.limits {
		p := l.String()
		if l.Algorithm != ratelimit.SlidingWindow {
			p += " " + string(l.Algorithm)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// planShapes are the decisions compared: a plan with one limit and with
// three (a burst, a sustained limit, a daily quota), a sliding-log route
// limit alone, and that route limit under a sliding-window tier, which is
// one call of the plan's mixed script.
func planShapes() []planShape {
	plan := func(count int64, window time.Duration) ratelimit.Limit {
		return ratelimit.Limit{Name: "pro", Count: count, Window: window, Algorithm: ratelimit.SlidingWindow}
	}
	route := ratelimit.Limit{Name: "login", Count: 300, Window: time.Minute, Algorithm: ratelimit.SlidingLog}
	return []planShape{
		{name: "one limit", script: "sliding_window.lua, one limit",
			limits: []ratelimit.Limit{plan(600, time.Minute)}},
		{name: "three limits", script: "sliding_window.lua, several limits",
			limits: []ratelimit.Limit{plan(20, time.Second), plan(600, time.Minute), plan(10_000, 24*time.Hour)}},
		{name: "sliding-log route alone", script: "sliding_log.lua",
			limits: []ratelimit.Limit{route}},
		{name: "mixed: tier + route", script: "mixed.lua, pair form",
			limits: []ratelimit.Limit{plan(600, time.Minute), route}},
	}
}

// runPlans measures every plan shape: rounds interleaved at
// plansConcurrency (decisions per second, Redis time, commands and round
// trips, as the throughput phase measures them), then allocations.
func runPlans(ctx context.Context, b *bench) (*plansInfo, error) {
	info := &plansInfo{
		Date:          time.Now().UTC().Format("2006-01-02 15:04 MST"),
		LoadBefore:    loadAverage(),
		Concurrency:   plansConcurrency,
		Rounds:        b.cfg.plansRounds,
		RoundDuration: b.cfg.duration.String(),
		Identities:    len(b.ids),
	}
	lim, err := ratelimit.NewLimiter(b.client, ratelimit.Options{})
	if err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	if err := lim.LoadScripts(ctx); err != nil {
		return nil, fmt.Errorf("plans: %w", err)
	}
	shapes := planShapes()
	denied := make([]atomic.Int64, len(shapes))
	contenders := make([]*contender, len(shapes))
	for i, s := range shapes {
		// Every identity's checks are built once, outside the measured
		// loop, as a caller that resolved its plan would hold them.
		checks := make(map[string][]ratelimit.Check, len(b.ids))
		for _, id := range b.ids {
			checks[id] = s.checks(id)
		}
		contenders[i] = &contender{Name: s.name, build: func(func() time.Time, limitSpec) (decider, error) {
			return func(ctx context.Context, identity string) (bool, error) {
				res, err := lim.Decide(ctx, 1, checks[identity]...)
				if err == nil && !res.Allowed {
					denied[i].Add(1)
				}
				return res.Allowed, err
			}, nil
		}}
	}
	if err := b.stats.FlushAll(ctx).Err(); err != nil {
		return nil, fmt.Errorf("flushall: %w", err)
	}
	// One decision of every shape per identity first, so that the rounds
	// meet keys that exist, as a steady state does, rather than paying for
	// creating them.
	for i, c := range contenders {
		b.progress.set("several limits: one decision per identity, " + c.Name)
		decide, _ := c.build(nil, limitSpec{})
		err := parallelChunks(plansConcurrency, len(b.ids), 100, func(lo, hi int) error {
			for _, id := range b.ids[lo:hi] {
				if _, err := decide(ctx, id); err != nil {
					return fmt.Errorf("plans: warm-up, %s: %w", c.Name, err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		denied[i].Store(0)
	}
	runs := make([][]throughputRun, len(shapes))
	calls := make([]map[string]int64, len(shapes))
	for round := 0; round < b.cfg.plansRounds; round++ {
		for i, c := range contenders {
			b.progress.set(fmt.Sprintf("several limits: round %d/%d, %s", round+1, b.cfg.plansRounds, c.Name))
			r, err := runThroughput(ctx, b, c, plansConcurrency, b.cfg.duration)
			if err != nil {
				return nil, fmt.Errorf("plans: %w", err)
			}
			runs[i] = append(runs[i], r)
			// runThroughput reset the statistics before the round; what
			// they hold now is the round's (and INFO's own calls).
			stats, err := commandStats(ctx, b.stats)
			if err != nil {
				return nil, fmt.Errorf("plans: %w", err)
			}
			if calls[i] == nil {
				calls[i] = map[string]int64{}
			}
			for name, st := range stats {
				if name != "info" && name != "config|resetstat" && name != "config" {
					calls[i][name] += st.Calls
				}
			}
		}
	}
	for i, s := range shapes {
		pc := planCase{Name: s.name, Limits: s.limitList(), Script: s.script,
			Throughput: summarise(plansConcurrency, runs[i]), Denied: denied[i].Load(),
			Decisions: calls[i]["evalsha"], CommandsByName: map[string]float64{}}
		for name, n := range calls[i] {
			pc.CommandsByName[name] = float64(n) / float64(max(1, pc.Decisions))
		}
		b.progress.set("several limits: allocations, " + s.name)
		checks := s.checks("alloc-plan")
		pc.Allocs, pc.AllocBytes, err = allocsOf(func() error {
			_, err := lim.Decide(ctx, 1, checks...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("plans: allocations, %s: %w", s.name, err)
		}
		info.Cases = append(info.Cases, pc)
	}
	info.LoadAfter = loadAverage()
	return info, nil
}

// allocsOf is the heap allocations and bytes per call of f, over 5,000
// calls after 100 to warm the connection pool and the script cache.
func allocsOf(f func() error) (allocs, bytes float64, err error) {
	const n = 5000
	for i := 0; i < 100; i++ {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n, nil
}

// runOnlyPlans measures the several-limits section alone and puts it into
// the report of an earlier run (out/benchmarks/results.json), whose other
// figures it keeps: `go run . -only plans`.
func runOnlyPlans(ctx context.Context, cfg config, out, serverBin string) error {
	return updateEarlierRun(out, serverBin, "plans", func(p *progress, srv *redisServer, res *results) error {
		hook := newRoundTrips()
		client := redis.NewClient(&redis.Options{Addr: srv.addr, PoolSize: 256, MinIdleConns: 64, PoolTimeout: 30 * time.Second, ReadTimeout: 10 * time.Second})
		client.AddHook(hook)
		defer client.Close()
		stats := statsClient(srv.addr)
		defer stats.Close()
		b := &bench{cfg: cfg, client: client, stats: stats, hook: hook, ids: benchIdentities(), progress: p}
		plans, err := runPlans(ctx, b)
		if err != nil {
			return err
		}
		plans.MeasuredAlone = true
		res.Plans = plans
		// Targets are checked again from the figures, as -render does; the
		// figures they read are the earlier run's, so they do not change.
		res.Targets = checkTargets(res)
		return nil
	})
}

// plansSection renders the several-limits section, or nothing when the
// run has none.
func plansSection(p *plansInfo) string {
	if p == nil || len(p.Cases) == 0 {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Several limits per decision\n\n")
	w("One identity, several limits, one `Limiter.Decide` with one `ratelimit.Check` per limit: a plan with one limit against the same plan with three ")
	w("(a burst, a sustained limit and a daily quota, all of the default algorithm), and a sliding-log route limit alone and under a sliding-window tier, ")
	w("which `Limiter` sends as one call of `lua/mixed.lua`. Random identities out of %d, Redis's own clock, concurrency %d, %d rounds of %s interleaving the four; ",
		p.Identities, p.Concurrency, p.Rounds, p.RoundDuration)
	w("every identity made one decision of each kind before the rounds, so that they meet existing keys, as a steady state does; ")
	w("the limits are wide enough that (almost) every decision admits and writes (the denials column counts the exceptions). ")
	w("Redis time, commands and round trips are measured as in the Redis-cost table (`CONFIG RESETSTAT`, then `INFO commandstats`; medians over the rounds); ")
	w("allocations are `runtime.MemStats` over 5,000 sequential decisions of one identity in this process, go-redis included. ")
	if p.MeasuredAlone {
		w("This section was measured alone, by `go run . -only plans`, on %s", p.Date)
	} else {
		w("Measured in this run, on %s", p.Date)
	}
	w(", load average (1/5/15 min) %s at the start and %s at the end.\n\n", p.LoadBefore, p.LoadAfter)
	w("| decision | limits | script | decisions/s (c=%d) | p50 / p99 us | Redis us/decision (min) | commands/decision | round trips/decision | allocations (bytes) per decision | denied |\n", p.Concurrency)
	w("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range p.Cases {
		t := c.Throughput
		best := 0.0
		for i, r := range t.Rounds {
			if i == 0 || r.Cost.UsecPerDecision < best {
				best = r.Cost.UsecPerDecision
			}
		}
		w("| %s | %s | %s | %.0f (%.0f..%.0f) | %.0f / %.0f | %.2f (%.2f) | %.2f | %.2f | %.0f (%.0f B) | %d of %d |\n",
			c.Name, c.Limits, c.Script, t.Median.PerSecond, t.MinPerSec, t.MaxPerSec, t.Median.P50us, t.Median.P99us,
			t.Median.Cost.UsecPerDecision, best, t.Median.Cost.CommandsPerDecision, t.Median.Cost.TripsPerDecision,
			c.Allocs, c.AllocBytes, c.Denied, c.Decisions)
	}
	w("\nCommands Redis executed per decision, by name (inside the scripts included; the `EVALSHA` is the decision itself):\n\n")
	names := p.commandNames()
	w("| decision |")
	for _, n := range names {
		w(" %s |", strings.ToUpper(n))
	}
	w("\n| --- |%s\n", strings.Repeat(" ---: |", len(names)))
	for _, c := range p.Cases {
		w("| %s |", c.Name)
		for _, n := range names {
			if v, ok := c.CommandsByName[n]; ok {
				w(" %.2f |", v)
			} else {
				w(" - |")
			}
		}
		w("\n")
	}

	one, three, log, mixed := p.find("one limit"), p.find("three limits"), p.find("sliding-log route alone"), p.find("mixed: tier + route")
	if one != nil && three != nil {
		o, t := one.Throughput.Median, three.Throughput.Median
		w("\nThree limits cost **%.2fx** one limit's Redis time (%.2f against %.2f us), **%.2fx** its commands (%.2f against %.2f), **%.2fx** its allocations (%.0f against %.0f) and %.2fx its decisions per second, in the same one round trip.\n\n",
			t.Cost.UsecPerDecision/o.Cost.UsecPerDecision, t.Cost.UsecPerDecision, o.Cost.UsecPerDecision,
			t.Cost.CommandsPerDecision/o.Cost.CommandsPerDecision, t.Cost.CommandsPerDecision, o.Cost.CommandsPerDecision,
			three.Allocs/one.Allocs, three.Allocs, one.Allocs, t.PerSecond/o.PerSecond)
		w("Why: `sliding_window.lua` keeps one integer key per limit and spends with one `INCRBY` per limit, after one `TIME` for the whole call. ")
		w("Each limit is decided by the same function of the script (`decide`), whose `INCRBY` is the whole write when the key already holds the current window: one limit is `EVALSHA`, `TIME`, `INCRBY`; ")
		w("three limits are `TIME` and three `INCRBY`s, then a `SET ... PX` for every limit whose key holds an older window or had expired. ")
		w("Here an identity is decided %.2f times per round of one kind on average, and the kinds take turns, so it usually comes back more than a second later: ",
			float64(three.Decisions)/float64(max(1, p.Rounds))/float64(max(1, p.Identities)))
		w("its 1-second burst key has expired or holds an older second, and that key's rewrite is the %.2f `SET`s per decision above (the minute and the day roll over rarely). ",
			three.CommandsByName["set"])
		w("A caller that comes back within the second pays only the `INCRBY`s; one seen less often than every second pays the rewrite on its burst limit whatever else it has. ")
		if t.Cost.UsecPerDecision/o.Cost.UsecPerDecision > t.Cost.CommandsPerDecision/o.Cost.CommandsPerDecision {
			w("Redis time grows faster than the commands: each limit still pays its Lua (its window, its counts, its admission) and its key, and a script's time is mostly its Lua and its arguments, not its commands. ")
		} else {
			w("Redis time grows more slowly than the commands: the call's fixed part (the `EVALSHA`, reading the arguments, the reply) is paid once. ")
		}
		w("On the client, a decision builds one key per limit (the identity is hashed once) and decodes one more reply value per limit into its own `Decision`.\n")
	}
	if log != nil && mixed != nil && one != nil {
		lm, mm, om := log.Throughput.Median, mixed.Throughput.Median, one.Throughput.Median
		w("\nThe mixed pair costs %.2f us of Redis time and %.2f commands, against %.2f + %.2f us and %.2f + %.2f commands for its two limits decided alone: ",
			mm.Cost.UsecPerDecision, mm.Cost.CommandsPerDecision, om.Cost.UsecPerDecision, lm.Cost.UsecPerDecision,
			om.Cost.CommandsPerDecision, lm.Cost.CommandsPerDecision)
		w("`lua/mixed.lua` decides every group before it writes: the tier is peeked (a `GET`), the route spends only if that admits, and the tier spends (its `INCRBY`) only if the route admitted, so a denial by one algorithm spends nothing on the other, with no journal and no undo; every algorithm's script is in it once, as a function. ")
		w("It reads `TIME` once and costs one round trip where deciding the two separately would cost two and would not be atomic. ")
		w("It sends 9 arguments after its SHA-1 (the key count, two keys, the cost, the pair's shape, the two limits' counts and windows). ")
		w("The server-side section above measures the same pair without a Go client.\n")
	}
	w("\n")
	return b.String()
}

// commandNames is every command name of the cases, the EVALSHA and TIME
// first, then by how many a decision of any case runs, most first.
func (p *plansInfo) commandNames() []string {
	most := map[string]float64{}
	for _, c := range p.Cases {
		for n, v := range c.CommandsByName {
			most[n] = max(most[n], v)
		}
	}
	rank := func(n string) int {
		switch n {
		case "evalsha":
			return 0
		case "time":
			return 1
		}
		return 2
	}
	var names []string
	for n := range most {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		if most[a] != most[b] {
			if most[a] > most[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}

func (p *plansInfo) find(name string) *planCase {
	for i := range p.Cases {
		if p.Cases[i].Name == name {
			return &p.Cases[i]
		}
	}
	return nil
}
