package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// cmdStat is one line of INFO commandstats.
type cmdStat struct {
	Calls int64
	Usec  int64
}

// commandStats reads INFO commandstats, keyed by lower-case command name.
func commandStats(ctx context.Context, c *redis.Client) (map[string]cmdStat, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("info commandstats: %w", err)
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var s cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				s.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				s.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = s
	}
	return out, nil
}

// infoField reads one numeric field of an INFO section.
func infoField(ctx context.Context, c *redis.Client, section, field string) (int64, error) {
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return 0, fmt.Errorf("info %s: %w", section, err)
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && k == field {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("info %s %s=%q: %w", section, field, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("info %s: no field %s", section, field)
}

// roundTrips is a go-redis hook that counts what the client sends: round
// trips (one per command or per pipeline) and the top-level command names,
// so that Redis time can be attributed to the commands a contender issues
// rather than to the commands its scripts run inside.
type roundTrips struct {
	trips atomic.Int64
	mu    sync.Mutex
	names map[string]bool
	// last is the arguments of the last command sent alone (not in a
	// pipeline): the server-side section replays a decision from it.
	last []any
}

func newRoundTrips() *roundTrips { return &roundTrips{names: map[string]bool{}} }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.note(cmd.Name(), cmd.Args())
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		for _, c := range cmds {
			h.note(c.Name(), nil)
		}
		return next(ctx, cmds)
	}
}

func (h *roundTrips) note(name string, args []any) {
	name = strings.ToLower(name)
	h.mu.Lock()
	h.names[name] = true
	if args != nil {
		h.last = args
	}
	h.mu.Unlock()
}

// lastSent is the arguments of the last command sent alone.
func (h *roundTrips) lastSent() []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// reset forgets the counts and names seen so far.
func (h *roundTrips) reset() {
	h.trips.Store(0)
	h.mu.Lock()
	h.names = map[string]bool{}
	h.mu.Unlock()
}

// sent returns the top-level command names seen since reset.
func (h *roundTrips) sent() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]bool, len(h.names))
	for k := range h.names {
		out[k] = true
	}
	return out
}

// statsClient is the connection the benchmark uses for INFO, CONFIG and
// FLUSHALL, outside the hook, so that they never count as a contender's.
func statsClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr})
}

// redisCost is what Redis spent on a run, from INFO commandstats.
type redisCost struct {
	// UsecPerDecision is the time of the top-level commands the contender
	// sent (EVALSHA's time includes its script), divided by decisions.
	UsecPerDecision float64 `json:"usec_per_decision"`
	// CommandsPerDecision counts every command Redis executed, those run
	// inside scripts included.
	CommandsPerDecision float64 `json:"commands_per_decision"`
	// TripsPerDecision is client round trips per decision.
	TripsPerDecision float64 `json:"round_trips_per_decision"`
}

func costOf(stats map[string]cmdStat, sent map[string]bool, decisions, trips int64) redisCost {
	if decisions == 0 {
		return redisCost{}
	}
	var usec, calls int64
	for name, s := range stats {
		if name == "info" || name == "config|resetstat" || name == "config" {
			continue
		}
		calls += s.Calls
		if sent[name] {
			usec += s.Usec
		}
	}
	d := float64(decisions)
	return redisCost{
		UsecPerDecision:     float64(usec) / d,
		CommandsPerDecision: float64(calls) / d,
		TripsPerDecision:    float64(trips) / d,
	}
}
