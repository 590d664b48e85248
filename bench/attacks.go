package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// step is a number of attempts at one instant, in units of the window.
type step struct {
	at float64
	n  int
}

// attack is a schedule of attempts by one identity.
type attack struct {
	Name  string
	About string
	steps []step
	until float64 // end of the chart, in windows
}

// attacks returns the two adversarial schedules for a limit of l per
// window, with margin delta (in windows) around the boundary at 1.0.
func attacks(l int64, delta float64) []attack {
	boundary := attack{
		Name:  "boundary",
		About: fmt.Sprintf("1 request at 0 (opens windows that start at a first request), %d at %.2fW, %d at %.2fW", l, 1-delta, l, 1+delta),
		steps: []step{{0, 1}, {1 - delta, int(l)}, {1 + delta, int(l)}},
		until: 2.5,
	}
	adv := attack{
		Name: "adversarial",
		About: fmt.Sprintf("1 request at 0, %d at %.2fW (packed at the end of a window), then one attempt every W/%d through the next window",
			l, 1-delta, 4*l),
		steps: []step{{0, 1}, {1 - delta, int(l)}},
		until: 2.5,
	}
	for i := int64(0); i < 4*l; i++ {
		adv.steps = append(adv.steps, step{1 + float64(i)/float64(4*l), 1})
	}
	return []attack{boundary, adv}
}

// attackResult is what one contender admitted under one attack.
type attackResult struct {
	Attack       string    `json:"attack"`
	Attempts     int       `json:"attempts"`
	Admitted     int       `json:"admitted"`
	MaxInWindow  int       `json:"max_admitted_in_any_rolling_window"`
	MaxOverLimit float64   `json:"max_over_limit"`
	Clock        string    `json:"clock"`
	Series       []float64 `json:"series"` // admitted in (t-W, t] / limit, t = i*seriesStep
}

const seriesStep = 0.01

// runAttack plays an attack against a contender. Contenders with a
// controllable clock see exact virtual instants on an aligned window of
// virtualLimit; the others are played in real time on realLimit, with
// each burst spread over 8 concurrent clients so that it takes a few ms.
func runAttack(ctx context.Context, b *bench, c *contender, a attack) (attackResult, error) {
	if err := b.stats.FlushAll(ctx).Err(); err != nil {
		return attackResult{}, fmt.Errorf("flushall: %w", err)
	}
	var admittedAt []float64
	attempts := 0
	var lim limitSpec
	mode := ""
	if c.Virtual {
		lim = b.cfg.attackLimit
		mode = "virtual clock, exact instants"
		base := alignedBase(lim.Window).Add(10 * lim.Window)
		var now time.Time
		decide, err := c.build(func() time.Time { return now }, lim)
		if err != nil {
			return attackResult{}, err
		}
		for _, s := range a.steps {
			now = base.Add(time.Duration(s.at * float64(lim.Window)))
			for i := 0; i < s.n; i++ {
				attempts++
				ok, err := decide(ctx, "attacker")
				if err != nil {
					return attackResult{}, fmt.Errorf("%s: %s: %w", c.Name, a.Name, err)
				}
				if ok {
					admittedAt = append(admittedAt, s.at)
				}
			}
		}
	} else {
		lim = b.cfg.realAttackLimit
		mode = fmt.Sprintf("real time, W=%s (clock not controllable)", lim.Window)
		decide, err := c.build(nil, lim)
		if err != nil {
			return attackResult{}, err
		}
		var mu sync.Mutex
		t0 := time.Now()
		for _, s := range a.steps {
			time.Sleep(time.Until(t0.Add(time.Duration(s.at * float64(lim.Window)))))
			attempts += s.n
			err := parallelChunks(8, s.n, 1, func(lo, hi int) error {
				for i := lo; i < hi; i++ {
					ok, err := decide(ctx, "attacker")
					if err != nil {
						return err
					}
					if ok {
						at := float64(time.Since(t0)) / float64(lim.Window)
						mu.Lock()
						admittedAt = append(admittedAt, at)
						mu.Unlock()
					}
				}
				return nil
			})
			if err != nil {
				return attackResult{}, fmt.Errorf("%s: %s: %w", c.Name, a.Name, err)
			}
		}
	}
	slices.Sort(admittedAt)
	maxIn := maxInRollingWindow(admittedAt, 1.0)
	res := attackResult{
		Attack:       a.Name,
		Attempts:     attempts,
		Admitted:     len(admittedAt),
		MaxInWindow:  maxIn,
		MaxOverLimit: float64(maxIn) / float64(lim.Count),
		Clock:        mode,
	}
	for i := 0; float64(i)*seriesStep <= a.until+1e-9; i++ {
		t := float64(i) * seriesStep
		res.Series = append(res.Series, float64(countIn(admittedAt, t-1, t))/float64(lim.Count))
	}
	return res, nil
}

// maxInRollingWindow is the most events in any half-open (s, s+w] of
// sorted times.
func maxInRollingWindow(times []float64, w float64) int {
	best, lo := 0, 0
	for hi := range times {
		for times[lo] <= times[hi]-w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// countIn counts sorted times in (from, to].
func countIn(times []float64, from, to float64) int {
	lo, _ := slices.BinarySearch(times, from)
	for lo < len(times) && times[lo] <= from {
		lo++
	}
	hi, _ := slices.BinarySearch(times, to)
	for hi < len(times) && times[hi] <= to {
		hi++
	}
	return hi - lo
}
