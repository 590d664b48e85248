package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// results is everything one run measured; it is also results.json.
type results struct {
	Date         string             `json:"date"`
	CPU          string             `json:"cpu"`
	Nproc        int                `json:"nproc"`
	GoVersion    string             `json:"go_version"`
	RedisVersion string             `json:"redis_version"`
	Seconds      float64            `json:"run_seconds"`
	LoadBefore   string             `json:"loadavg_before"`
	LoadAfter    string             `json:"loadavg_after"`
	Settings     map[string]string  `json:"settings"`
	Trace        traceInfo          `json:"trace"`
	Attacks      []attackInfo       `json:"attacks"`
	Contenders   []*contenderResult `json:"contenders"`
	Lambda       lambdaInfo         `json:"lambda"`
	Plans        *plansInfo         `json:"several_limits,omitempty"`
	ServerSide   *serverSideInfo    `json:"server_side,omitempty"`
	Targets      []target           `json:"targets"`
	// Remeasured lists the parts measured again after the run (-only),
	// whose figures are then not the run's.
	Remeasured []remeasure `json:"remeasured,omitempty"`
}

// remeasure is one part of a run measured again by -only.
type remeasure struct {
	Part       string `json:"part"`
	Date       string `json:"date"`
	LoadBefore string `json:"loadavg_before"`
	LoadAfter  string `json:"loadavg_after"`
}

type traceInfo struct {
	Requests      int    `json:"requests"`
	Identities    int    `json:"identities"`
	Duration      string `json:"duration"`
	Limit         string `json:"limit"`
	ExactAdmitted int    `json:"exact_log_admitted"`
}

type attackInfo struct {
	Name  string `json:"name"`
	About string `json:"about"`
}

// contenderResult is one contender's figures across the phases.
type contenderResult struct {
	Name       string             `json:"name"`
	Group      string             `json:"group"`
	Clock      string             `json:"clock"`
	Throughput []throughputResult `json:"throughput"`
	Memory     *memoryResult      `json:"memory,omitempty"`
	Burst      *burstResult       `json:"burst,omitempty"`
	Flood      []floodResult      `json:"flood,omitempty"`
	Attacks    []attackResult     `json:"attacks,omitempty"`
	Accuracy   *accuracyResult    `json:"accuracy,omitempty"`
}

// usecPerDecision is the median Redis time per decision over every round
// at every concurrency.
func (c *contenderResult) usecPerDecision() float64 {
	var xs []float64
	for _, t := range c.Throughput {
		for _, r := range t.Rounds {
			xs = append(xs, r.Cost.UsecPerDecision)
		}
	}
	return median(xs)
}

// usecMin is the least Redis time per decision of any round.
func (c *contenderResult) usecMin() float64 {
	best := math.Inf(1)
	for _, t := range c.Throughput {
		for _, r := range t.Rounds {
			best = math.Min(best, r.Cost.UsecPerDecision)
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

func (c *contenderResult) commandsPerDecision() float64 {
	var xs []float64
	for _, t := range c.Throughput {
		for _, r := range t.Rounds {
			xs = append(xs, r.Cost.CommandsPerDecision)
		}
	}
	return median(xs)
}

func (c *contenderResult) at(conc int) *throughputResult {
	for i := range c.Throughput {
		if c.Throughput[i].Concurrency == conc {
			return &c.Throughput[i]
		}
	}
	return nil
}

func (c *contenderResult) attack(name string) *attackResult {
	for i := range c.Attacks {
		if c.Attacks[i].Attack == name {
			return &c.Attacks[i]
		}
	}
	return nil
}

func (c *contenderResult) flood(modeContains string) *floodResult {
	for i := range c.Flood {
		if strings.Contains(c.Flood[i].Mode, modeContains) {
			return &c.Flood[i]
		}
	}
	return nil
}

func newResults(ctx context.Context, stats *redis.Client, cfg config) (*results, error) {
	info, err := stats.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("info server: %w", err)
	}
	version := "unknown"
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			version = v
		}
	}
	cpu, nproc := machine()
	var conc []string
	for _, c := range cfg.concurrency {
		conc = append(conc, fmt.Sprint(c))
	}
	return &results{
		Date:         time.Now().UTC().Format("2006-01-02 15:04 MST"),
		CPU:          cpu,
		Nproc:        nproc,
		GoVersion:    runtime.Version(),
		RedisVersion: version,
		LoadBefore:   loadAverage(),
		Settings: map[string]string{
			"rounds":               fmt.Sprint(cfg.rounds),
			"round_duration":       cfg.duration.String(),
			"concurrency":          strings.Join(conc, ","),
			"throughput_limit":     fmt.Sprintf("%d/%s over 10000 identities", cfg.throughputLimit.Count, cfg.throughputLimit.Window),
			"memory_identities":    fmt.Sprint(cfg.identities),
			"memory_limit":         fmt.Sprintf("%d/%s", cfg.memoryLimit.Count, cfg.memoryLimit.Window),
			"burst_requests":       fmt.Sprint(cfg.burst),
			"burst_limit":          fmt.Sprintf("%d/%s", cfg.burstLimit.Count, cfg.burstLimit.Window),
			"attack_limit_virtual": fmt.Sprintf("%d/%s", cfg.attackLimit.Count, cfg.attackLimit.Window),
			"attack_limit_real":    fmt.Sprintf("%d/%s", cfg.realAttackLimit.Count, cfg.realAttackLimit.Window),
		},
	}, nil
}

// target is one of the targets and whether this run met it.
type target struct {
	Name     string `json:"name"`
	Want     string `json:"want"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
	Why      string `json:"why,omitempty"`
	// NoMark is a row reported as measured, with no bound to meet (Met
	// is then true).
	NoMark bool `json:"no_mark,omitempty"`
}

func find(res *results, name string) *contenderResult {
	for _, c := range res.Contenders {
		if c.Name == name {
			return c
		}
	}
	return nil
}

const (
	nameDefault   = "slidegate sliding-window"
	nameFixed     = "slidegate fixed-window"
	nameLeaky     = "slidegate leaky-bucket"
	nameBuckets   = "slidegate sliding-buckets"
	nameRedisRate = "redis_rate v10 (GCRA)"
	nameTwoKey    = "baseline two-key counter"
	nameUlule     = "ulule/limiter v3 (redis)"
	// nameIncrPexpire is the plainest fixed window, the yardstick of the
	// Redis-time target.
	nameIncrPexpire = "ceiling: INCR+PEXPIRE fixed window"
)

// checkTargets compares the run with the targets. It only reads
// figures; nothing here feeds back into what is measured.
func checkTargets(res *results) []target {
	var out []target
	def, fixed, rr, two := find(res, nameDefault), find(res, nameFixed), find(res, nameRedisRate), find(res, nameTwoKey)
	if def == nil || fixed == nil {
		return out
	}

	ul := find(res, nameUlule)
	hi := 0
	for _, tr := range def.Throughput {
		hi = max(hi, tr.Concurrency)
	}

	// Redis time per decision, read from the server-side section
	// (redis-benchmark, no Go client): at most ulule's, or at most ulule's
	// once the Redis clock's cost measured in the same run is taken off,
	// and at most 1.6x the plain INCR+PEXPIRE fixed window.
	out = append(out, serverTargets(res.ServerSide)...)
	if p := res.Plans; p != nil && p.MemoryOne > 0 {
		r := p.MemoryThree / p.MemoryOne
		t := target{Name: "memory: a three-limit plan's state against one limit's",
			Want: "at most 150 B per identity for one limit, a three-limit plan at most 2.5x one limit (issue 38)",
			Measured: fmt.Sprintf("one limit %.0f B per identity, three limits %.0f B = %.2fx (used_memory over %d identities, one decision each)",
				p.MemoryOne, p.MemoryThree, r, p.MemoryIdentities),
			Met: p.MemoryOne <= 150 && r <= 2.5}
		if !t.Met {
			t.Why = fmt.Sprintf("%.0f B, %.2fx", p.MemoryOne, r)
		}
		out = append(out, t)
	}

	// Decisions per second and client CPU at the highest concurrency,
	// against ulule/limiter.
	if d, u := def.at(hi), ul.at(hi); ul != nil && d != nil && u != nil {
		t := target{
			Name: fmt.Sprintf("decisions per second at concurrency %d", hi),
			Want: "at least ulule/limiter's: median at least its median, slowest round at least its slowest",
			Measured: fmt.Sprintf("%.0f/s (rounds %.0f..%.0f) vs ulule/limiter %.0f/s (rounds %.0f..%.0f): %.2fx",
				d.Median.PerSecond, d.MinPerSec, d.MaxPerSec, u.Median.PerSecond, u.MinPerSec, u.MaxPerSec,
				d.Median.PerSecond/u.Median.PerSecond),
			Met: d.Median.PerSecond >= u.Median.PerSecond && d.MinPerSec >= u.MinPerSec,
		}
		if !t.Met {
			t.Why = fmt.Sprintf("median %.0f%% below", max(0, (1-d.Median.PerSecond/u.Median.PerSecond)*100))
			if d.MinPerSec < u.MinPerSec {
				t.Why += fmt.Sprintf(", slowest round %.0f%% below the peer's", (1-d.MinPerSec/u.MinPerSec)*100)
			}
		}
		out = append(out, t)
		dc, uc := d.Median.ClientCPUus, u.Median.ClientCPUus
		t = target{
			Name:     fmt.Sprintf("client CPU per decision at concurrency %d", hi),
			Want:     "at most 1.2x ulule/limiter's",
			Measured: fmt.Sprintf("%.1f us vs ulule/limiter %.1f us: %.2fx", dc, uc, dc/uc),
			Met:      uc > 0 && dc <= 1.2*uc,
		}
		if !t.Met {
			t.Why = fmt.Sprintf("%.0f%% above 1.2x", (dc/(1.2*uc)-1)*100)
		}
		out = append(out, t)
	}
	if a := res.Lambda.AllocsPerDecision; a > 0 {
		t := target{Name: "allocations per decision, Limiter path", Want: "at most 15",
			Measured: fmt.Sprintf("%.1f (Gate: %.1f)", a, res.Lambda.AllocsPerGate), Met: a <= 15}
		if !t.Met {
			t.Why = fmt.Sprintf("%.1f over", a-15)
		}
		out = append(out, t)
	}

	// Memory.
	if def.Memory != nil {
		dm := def.Memory.BytesPerIdentity
		meas := fmt.Sprintf("%.0f B with a %d-character key (%s)", dm, def.Memory.KeyBytes, def.Memory.KeyExample)
		rrOK := true
		if rr != nil && rr.Memory != nil {
			meas += fmt.Sprintf("; redis_rate %.0f B with a %d-character key", rr.Memory.BytesPerIdentity, rr.Memory.KeyBytes)
			rrOK = dm < rr.Memory.BytesPerIdentity && rr.Memory.KeyBytes == def.Memory.KeyBytes
		}
		if fixed.Memory != nil {
			meas += fmt.Sprintf("; fixed window %.0f B", fixed.Memory.BytesPerIdentity)
		}
		if two != nil && two.Memory != nil {
			meas += fmt.Sprintf("; two-key baseline %.0f B", two.Memory.BytesPerIdentity)
		}
		t := target{Name: "bytes per active identity", Want: "at most 150, and below redis_rate's at equal key length",
			Measured: meas, Met: dm <= 150 && rrOK}
		if !t.Met {
			var why []string
			if dm > 150 {
				why = append(why, fmt.Sprintf("%.0f B over 150", dm-150))
			}
			if !rrOK {
				why = append(why, "not below redis_rate at equal key length")
			}
			t.Why = strings.Join(why, "; ")
		}
		out = append(out, t)
	}

	// Deny cache.
	if f := def.flood("with deny cache"); f != nil {
		t := target{Name: "Redis calls per denied request under a 100x flood, deny cache on",
			Want:     "at most 0.05",
			Measured: fmt.Sprintf("%.4f (%.4f per request; %d requests, %d admitted)", f.CallsPerDenied, f.CallsPerRequest, f.Requests, f.Admitted),
			Met:      f.CallsPerDenied <= 0.05}
		if !t.Met {
			t.Why = fmt.Sprintf("%.1fx the target", f.CallsPerDenied/0.05)
		}
		out = append(out, t)
	}

	// Burst.
	var bad []string
	for _, c := range res.Contenders {
		if c.Burst == nil {
			continue
		}
		want := c.Burst.Limit
		if c.Name == nameLeaky {
			want = 1 // the leaky bucket's burst is 1 by design
		}
		if c.Burst.Admitted != want {
			bad = append(bad, fmt.Sprintf("%s admitted %d (want %d)", c.Name, c.Burst.Admitted, want))
		}
	}
	t := target{Name: "5,000 simultaneous requests at limit 100", Want: "exactly 100 admitted by every algorithm (the leaky bucket: 1, its burst)",
		Measured: "every contender exact", Met: len(bad) == 0}
	if len(bad) > 0 {
		t.Measured = strings.Join(bad, "; ")
		t.Why = "see the burst table"
	}
	out = append(out, t)

	// Stretch.
	if sb := find(res, nameBuckets); sb != nil {
		worst := 0.0
		for _, a := range sb.Attacks {
			worst = math.Max(worst, a.MaxOverLimit)
		}
		t := target{Name: "stretch: bounded memory, worst case at most 1.1x in any rolling window",
			Want:     "<= 1.1x under every attack",
			Measured: fmt.Sprintf("sliding-buckets: worst %.2fx under the attacks", worst),
			Met:      worst <= 1.1+1e-9}
		if sb.Memory != nil {
			t.Measured += fmt.Sprintf(", %.0f B per identity", sb.Memory.BytesPerIdentity)
		}
		if a := sb.Accuracy; a != nil && a.Note == "" {
			t.Measured += fmt.Sprintf(", %.2f%% of the trace differs from the exact log", 100*a.DifferShare)
		}
		if !t.Met {
			t.Why = fmt.Sprintf("%.0f%% above 1.1x", (worst/1.1-1)*100)
		}
		out = append(out, t)
	}
	return out
}

// sortedByUsec returns contenders ordered by Redis time per decision.
func sortedByUsec(res *results) []*contenderResult {
	out := slices.Clone(res.Contenders)
	slices.SortStableFunc(out, func(a, b *contenderResult) int {
		switch {
		case a.usecPerDecision() < b.usecPerDecision():
			return -1
		case a.usecPerDecision() > b.usecPerDecision():
			return 1
		}
		return 0
	})
	return out
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures: how busy the
// shared machine was, which the throughput figures depend on.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
