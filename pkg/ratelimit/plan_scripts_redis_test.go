package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestPlanScriptAgreesWithSlidingWindow: a plan script and
// sliding_window.lua, given the same plan, answer and write alike step
// after step, on keys of their own: every reply equal, every key's value
// equal, an expiry on the same keys (within the time between the two
// calls, as PX runs from Redis's clock), and a denied spend leaves every
// key exactly as it was, expiry included. The steps cross windows of
// every length in the plans, spend 1 to 3, peek, and now and then find a
// key gone (as after its expiry), holding a value not ours, an integer
// not of the layout, or a scale control's x form.
func TestPlanScriptAgreesWithSlidingWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := redistest.StartServer(t).Client(t)
	t.Cleanup(func() { client.Close() })
	set := newScriptSet(false)
	sec := time.Second.Microseconds()
	noon := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC).UnixMicro()
	plans := []struct {
		name  string
		args  []string // count, window per limit, as sliding_window.lua takes them
		start int64    // now at the first step; 0: noon
	}{
		{"three limits", []string{"3", fmt.Sprint(sec), "5", fmt.Sprint(4 * sec), "12", fmt.Sprint(60 * sec)}, 0},
		{"two limits", []string{"4", fmt.Sprint(2 * sec), "7", fmt.Sprint(9 * sec)}, 0},
		{"a shadow limit", []string{"3", fmt.Sprint(sec), "-2", fmt.Sprint(3 * sec), "12", fmt.Sprint(60 * sec)}, 0},
		{"shadow limits only", []string{"-2", fmt.Sprint(sec), "-5", fmt.Sprint(5 * sec)}, 0},
		{"a long limit", []string{"4", fmt.Sprint(2 * sec), "9", "-10000", "40", "-86400000"}, 0},
		{"the plan's own order", []string{"600", fmt.Sprint(60 * sec), "3", fmt.Sprint(sec)}, 0},
		// A count of 1,000,000 has a tag period of 4503 windows: the
		// first step falls on a window whose tag is 0, where a new key's
		// INCRBY already looks like this window's state.
		{"the largest count, at the tag's turn", []string{"1000000", fmt.Sprint(sec), "3", fmt.Sprint(sec)}, 1796381790 * sec},
	}
	steps, denials, fallbacks := 0, 0, 0
	for pi, plan := range plans {
		n := len(plan.args) / 2
		key := planKey{n: n}
		copy(key.args[:], plan.args)
		sc := set.plans.get(key)
		if sc == nil {
			t.Fatalf("%s: no plan script", plan.name)
		}
		keys := func(form string) []string {
			k := make([]string, n)
			for i := range k {
				k[i] = fmt.Sprintf("pl:{%d-%s}:%d", pi, form, i)
			}
			return k
		}
		now := noon
		if plan.start != 0 {
			now = plan.start
		}
		for step := range 80 {
			// A step of 0 to 1.5 s; costs 1 to 3, a peek one step in
			// four.
			now += int64((step*7919)%1500) * 1000
			cost := fmt.Sprint(1 + step%3)
			if step%4 == 3 {
				cost = "-" + cost
			}
			odd := planOddState(t, ctx, client, set, plan.args, step, now)
			var replies, states [2]string
			var expiries [2][]int64
			for fi, form := range []string{"general", "plan"} {
				k := keys(form)
				odd.plant(t, ctx, client, k)
				before, beforeExp := planKeyStates(t, ctx, client, k)
				var cmd []any
				if form == "general" {
					cmd = append([]any{nil, nil, n}, anySlice(k)...)
					cmd = append(cmd, cost)
					cmd = append(cmd, anySlice(plan.args)...)
				} else {
					cmd = append([]any{nil, nil, n}, anySlice(k)...)
					cmd = append(cmd, cost)
				}
				cmd = append(cmd, now)
				script := set.slidingWindow
				if form == "plan" {
					script = sc
				}
				r, err := script.run(ctx, client, cmd)
				if err != nil {
					t.Fatalf("%s, step %d, %s: %v", plan.name, step, form, err)
				}
				after, afterExp := planKeyStates(t, ctx, client, k)
				if r[0] == int64(0) && cost[0] != '-' {
					// (An x form is read into the layout whatever the
					// answer: the same state in another form.)
					if !holdsXForm(before) && fmt.Sprint(after, afterExp) != fmt.Sprint(before, beforeExp) {
						t.Fatalf("%s, step %d, %s: a denied spend changed the keys from %v (expiries %v) to %v (%v)",
							plan.name, step, form, before, beforeExp, after, afterExp)
					}
					if form == "plan" {
						denials++
					}
				}
				replies[fi], states[fi], expiries[fi] = fmt.Sprint(r), strings.Join(after, " | "), afterExp
			}
			if odd.key >= 0 && cost[0] != '-' {
				fallbacks++
			}
			steps++
			if replies[0] != replies[1] {
				t.Fatalf("%s, step %d, cost %s: the plan script replied %s, sliding_window.lua %s", plan.name, step, cost, replies[1], replies[0])
			}
			if states[0] != states[1] {
				t.Fatalf("%s, step %d, cost %s: the plan script left %s, sliding_window.lua %s", plan.name, step, cost, states[1], states[0])
			}
			for i := range n {
				g, p := expiries[0][i], expiries[1][i]
				if (g < 0) != (p < 0) || g-p > 2000 || p-g > 2000 {
					t.Fatalf("%s, step %d: key %d expires at %d after the plan script, at %d after sliding_window.lua", plan.name, step, i+1, p, g)
				}
			}
		}
	}
	// A test that never denies, or never meets an odd key, would not check
	// the put-back or the fallback.
	if denials < steps/10 || fallbacks < steps/10 {
		t.Fatalf("%d steps, %d denied spends, %d spends meeting an odd key: too few to check the put-back", steps, denials, fallbacks)
	}
	t.Logf("%d steps, %d denied spends, %d spends meeting an odd key", steps, denials, fallbacks)
}

// planOdd is a state to plant in one key of both forms before a step:
// value "" deletes it; key -1 plants nothing.
type planOdd struct {
	key   int
	value string
}

// plant puts the odd state into its key of keys, if any.
func (o planOdd) plant(t *testing.T, ctx context.Context, client redis.UniversalClient, keys []string) {
	t.Helper()
	switch {
	case o.key < 0:
	case o.value == "":
		if err := client.Del(ctx, keys[o.key]).Err(); err != nil {
			t.Fatal(err)
		}
	default:
		if err := client.Set(ctx, keys[o.key], o.value, 30*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// planOddState picks, one step in three, a key and an odd state for it:
// gone, a value not ours, an integer not of the layout, or the x form a
// scale control leaves (the state of twice the count, made by the general
// script on a scratch key at now).
func planOddState(t *testing.T, ctx context.Context, client redis.UniversalClient, set scriptSet, args []string, step int, now int64) planOdd {
	t.Helper()
	if step%3 != 1 {
		return planOdd{key: -1}
	}
	n := len(args) / 2
	i := (step / 3) % n
	switch (step / 3) % 4 {
	case 0:
		return planOdd{key: i}
	case 1:
		return planOdd{key: i, value: "not ours"}
	case 2:
		return planOdd{key: i, value: "123456789"}
	}
	count, _ := strconv.ParseInt(args[2*i], 10, 64)
	if count < 0 {
		count = -count
	}
	scratch := fmt.Sprintf("pl:{scratch-%d}", step)
	double := fmt.Sprint(2 * count)
	for range 3 {
		if _, err := set.slidingWindow.run(ctx, client, []any{nil, nil, 1, scratch, "1", double, args[2*i+1], now}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := client.Get(ctx, scratch).Result()
	if err != nil {
		t.Fatal(err)
	}
	return planOdd{key: i, value: "x" + double + ":" + v}
}

// holdsXForm reports whether a key's state (planKeyStates or
// mixedKeyStates) is a scale control's x form, which any call reads into
// the layout, whatever its answer.
func holdsXForm(states []string) bool {
	for _, v := range states {
		if strings.HasPrefix(v, "x") || strings.HasPrefix(v, "s:x") {
			return true
		}
	}
	return false
}

// planKeyStates is each key's value ("-" for none) and PEXPIRETIME.
func planKeyStates(t *testing.T, ctx context.Context, client redis.UniversalClient, keys []string) ([]string, []int64) {
	t.Helper()
	vals := make([]string, len(keys))
	exps := make([]int64, len(keys))
	for i, k := range keys {
		v, err := client.Get(ctx, k).Result()
		switch {
		case err == redis.Nil:
			v = "-"
		case err != nil:
			t.Fatal(err)
		}
		vals[i] = v
		if exps[i], err = client.Do(ctx, "PEXPIRETIME", k).Int64(); err != nil {
			t.Fatal(err)
		}
	}
	return vals, exps
}

// TestLimiterSendsAPlanScript: a Limiter decides a group of several
// sliding-window limits with the plan's script, sending the cost alone as
// ARGV (and the injected clock), which RateLimitVerdict knows as a decision;
// one limit, and a plan past the bound of plan scripts, go to
// sliding_window.lua with their arguments; all decide alike.
func TestLimiterSendsAPlanScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := redistest.StartServer(t).Client(t)
	t.Cleanup(func() { client.Close() })
	hook := &lastEvalHook{}
	client.AddHook(hook)
	l := loadedLimiter(t, client, Options{KeyPrefix: "lp"})
	perSecond := Limit{Name: "pro", Count: 2, Window: time.Second}
	perHour := Limit{Name: "pro", Count: 50, Window: time.Hour}

	res, err := l.Decide(ctx, 1, Check{Identity: "a", Limit: perSecond}, Check{Identity: "a", Limit: perHour})
	if err != nil || !res.Allowed {
		t.Fatalf("first decision: %+v, %v", res, err)
	}
	args := hook.last()
	if args[0] != "evalsha" || args[1] == l.scripts.slidingWindow.sha() || len(args) != 6 || args[5] != "1" {
		t.Fatalf("the plan was sent as %v, want the plan script's EVALSHA with 2 keys and the cost alone", args)
	}
	if err := hook.lastCmd().Err(); err != nil {
		t.Fatalf("the plan script's first call: %v (it is loaded before)", err)
	}
	if allowed, ours, err := hookVerdict(hook.lastCmd()); !ours || !allowed || err != nil {
		t.Fatalf("RateLimitVerdict of the plan script's call: allowed %v, ours %v, %v", allowed, ours, err)
	}
	// The per-second limit denies the third request; the hour's keeps
	// the two it admitted.
	for i := range 2 {
		res, err = l.Decide(ctx, 1, Check{Identity: "a", Limit: perSecond}, Check{Identity: "a", Limit: perHour})
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && (res.Allowed || res.Decisions[0].Allowed || !res.Decisions[1].Allowed || res.Decisions[1].Remaining != 47) {
			t.Fatalf("third request: %+v, want denied by the per-second limit, the hour's admitting it (47 left after it)", res)
		}
	}

	// A tier with a route: the mixed plan script, sent the cost and the
	// route's arguments; a route's denial spends nothing on the tier.
	login := Limit{Name: "login", Count: 2, Window: time.Minute, Algorithm: SlidingLog}
	for i := range 3 {
		res, err = l.Decide(ctx, 1, Check{Identity: "m", Limit: perHour}, Check{Identity: "m", Limit: login})
		if err != nil {
			t.Fatal(err)
		}
		args := hook.last()
		if args[1] == l.scripts.mixed.sha() || args[1] == l.scripts.mixed.src() || len(args) != 8 || args[5] != "1" || args[6] != "2" {
			t.Fatalf("the tier and route were sent as %v, want the mixed plan script with 2 keys, the cost and the route's count and window", args)
		}
		if allowed, ours, err := hookVerdict(hook.lastCmd()); !ours || allowed != res.Allowed || err != nil {
			t.Fatalf("RateLimitVerdict of the mixed plan script's call: allowed %v, ours %v, %v", allowed, ours, err)
		}
		if i == 2 && (res.Allowed || !res.Decisions[0].Allowed || res.Decisions[1].Allowed) {
			t.Fatalf("third login: %+v, want denied by the route alone", res)
		}
	}
	peek, err := l.Peek(ctx, 1, Check{Identity: "m", Limit: perHour})
	if err != nil || peek.Decisions[0].Remaining != 48 {
		t.Fatalf("the tier after two admitted logins and a denied one: %+v, %v; want 48 left (a peek counts nothing)", peek, err)
	}

	// A Limiter of its own script set, so that the bound is this test's:
	// fill it with other plans, and the next new plan is decided by
	// sliding_window.lua, alike.
	l = loadedLimiter(t, client, Options{KeyPrefix: "lq"})
	l.scripts = newScriptSet(false)
	if err := l.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range maxPlanScripts {
		other := Limit{Name: "fill", Count: int64(10 + i), Window: time.Minute}
		if _, err := l.Decide(ctx, 1, Check{Identity: "b", Limit: other}, Check{Identity: "b", Limit: perHour}); err != nil {
			t.Fatal(err)
		}
	}
	late := Limit{Name: "late", Count: 1, Window: time.Minute}
	res, err = l.Decide(ctx, 1, Check{Identity: "c", Limit: late}, Check{Identity: "c", Limit: perHour})
	if err != nil || !res.Allowed {
		t.Fatalf("a plan past the bound: %+v, %v", res, err)
	}
	if args := hook.last(); args[1] != l.scripts.slidingWindow.sha() || len(args) != 10 {
		t.Fatalf("a plan past the bound was sent as %v, want sliding_window.lua with its limits' arguments", args)
	}
	res, err = l.Decide(ctx, 1, Check{Identity: "c", Limit: late}, Check{Identity: "c", Limit: perHour})
	if err != nil || res.Allowed {
		t.Fatalf("a plan past the bound, second request: %+v, %v; want denied", res, err)
	}
}

// lastEvalHook keeps the last EVALSHA or EVAL sent.
type lastEvalHook struct {
	mu  sync.Mutex
	cmd redis.Cmder
}

func (h *lastEvalHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lastEvalHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *lastEvalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.mu.Lock()
			h.cmd = cmd
			h.mu.Unlock()
		}
		return err
	}
}

func (h *lastEvalHook) lastCmd() redis.Cmder {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cmd
}

func (h *lastEvalHook) last() []any { return h.lastCmd().Args() }

// TestMixedPlanScriptAgreesWithMixed: a mixed plan script (a sliding-window
// tier written in, then a route of another algorithm) and mixed.lua's
// general form, given the same two groups, answer and write alike step
// after step, on keys of their own, as TestPlanScriptAgreesWithSlidingWindow
// holds the plan script to sliding_window.lua: every reply and every key's
// state equal, and a denied spend leaves every key of both groups as it
// was, expiry included. Tiers of one and three limits, with a shadow or a
// long limit; routes of every other algorithm, enforced or shadow; a
// route of two limits.
func TestMixedPlanScriptAgreesWithMixed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := redistest.StartServer(t).Client(t)
	t.Cleanup(func() { client.Close() })
	set := newScriptSet(false)
	var cache limitCache
	args := func(l Limit, shadow bool) []string {
		e := cache.get(l)
		a := e.args
		if shadow {
			a = e.shadowArgs
		}
		out := make([]string, limitArgs(l.Algorithm))
		for i := range out {
			out[i] = a[i].(string)
		}
		return out
	}
	tiers := []struct {
		name   string
		limits []Limit
		shadow int // index of the shadow limit, -1 for none
	}{
		{"one limit", []Limit{{Count: 4, Window: 3 * time.Second}}, -1},
		{"three limits", []Limit{{Count: 3, Window: time.Second}, {Count: 6, Window: 5 * time.Second}, {Count: 20, Window: time.Minute}}, -1},
		{"a shadow limit", []Limit{{Count: 2, Window: time.Second}, {Count: 6, Window: 5 * time.Second}}, 0},
		{"a long limit", []Limit{{Count: 4, Window: 2 * time.Second}, {Count: 200_000, Window: 24 * time.Hour}}, -1},
	}
	routes := []struct {
		name   string
		limits []Limit
		shadow bool
	}{
		{"sliding log", []Limit{{Count: 3, Window: 4 * time.Second, Algorithm: SlidingLog}}, false},
		{"shadow sliding log", []Limit{{Count: 2, Window: 4 * time.Second, Algorithm: SlidingLog}}, true},
		{"fixed window", []Limit{{Count: 3, Window: 2 * time.Second, Algorithm: FixedWindow}}, false},
		{"token bucket", []Limit{{Count: 3, Window: 3 * time.Second, Algorithm: TokenBucket}}, false},
		{"leaky bucket", []Limit{{Count: 3, Window: 3 * time.Second, Algorithm: LeakyBucket}}, false},
		{"sliding buckets", []Limit{{Count: 3, Window: 4 * time.Second, Algorithm: SlidingBuckets}}, false},
		{"two sliding logs", []Limit{{Count: 3, Window: 4 * time.Second, Algorithm: SlidingLog}, {Count: 5, Window: 20 * time.Second, Algorithm: SlidingLog}}, false},
	}
	steps, denials, routeDenials, fallbacks := 0, 0, 0, 0
	for ti, tier := range tiers {
		var tierArgs []string
		for i, l := range tier.limits {
			tierArgs = append(tierArgs, args(l, i == tier.shadow)...)
		}
		n := len(tier.limits)
		for ri, route := range routes {
			name := tier.name + ", " + route.name
			code, per := mixedCode(route.limits[0].Algorithm), limitArgs(route.limits[0].Algorithm)
			var routeArgs []string
			for _, l := range route.limits {
				routeArgs = append(routeArgs, args(l, route.shadow)...)
			}
			key := planKey{n: n, other: code, otherLimits: len(route.limits), otherPerLimit: per}
			copy(key.args[:], tierArgs)
			sc := set.plans.get(key)
			if sc == nil {
				t.Fatalf("%s: no plan script", name)
			}
			keys := func(form string) []string {
				k := make([]string, n+len(route.limits))
				for i := range k {
					k[i] = fmt.Sprintf("mp:{%d-%d-%s}:%d", ti, ri, form, i)
				}
				return k
			}
			now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC).UnixMicro()
			for step := range 40 {
				now += int64((step*7919)%1500) * 1000
				cost := fmt.Sprint(1 + step%2)
				if step%5 == 4 {
					cost = "-" + cost
				}
				odd := planOddState(t, ctx, client, set, tierArgs, step, now)
				var replies, states [2]string
				for fi, form := range []string{"mixed", "plan"} {
					k := keys(form)
					odd.plant(t, ctx, client, k)
					if step%7 == 5 {
						// The route's key gone, as after its expiry.
						client.Del(ctx, k[n])
					}
					before, beforeExp := mixedKeyStates(t, ctx, client, k)
					cmd := append([]any{nil, nil, len(k)}, anySlice(k)...)
					script := set.mixed
					if form == "mixed" {
						cmd = append(cmd, cost, "2", "1", n, "2")
						cmd = append(cmd, anySlice(tierArgs)...)
						cmd = append(cmd, code, len(route.limits), per)
					} else {
						script = sc
						cmd = append(cmd, cost)
					}
					cmd = append(cmd, anySlice(routeArgs)...)
					cmd = append(cmd, now)
					r, err := script.run(ctx, client, cmd)
					if err != nil {
						t.Fatalf("%s, step %d, %s: %v", name, step, form, err)
					}
					after, afterExp := mixedKeyStates(t, ctx, client, k)
					if r[0] == int64(0) && cost[0] != '-' {
						if !holdsXForm(before) && fmt.Sprint(after, afterExp) != fmt.Sprint(before, beforeExp) {
							t.Fatalf("%s, step %d, %s: a denied spend changed the keys from %v (expiries %v) to %v (%v)",
								name, step, form, before, beforeExp, after, afterExp)
						}
						if form == "plan" {
							denials++
							if r[2] == int64(1) {
								routeDenials++
							}
						}
					}
					replies[fi], states[fi] = fmt.Sprint(r), strings.Join(after, " | ")
				}
				if odd.key >= 0 && cost[0] != '-' {
					fallbacks++
				}
				steps++
				if replies[0] != replies[1] {
					t.Fatalf("%s, step %d, cost %s: the plan script replied %s, mixed.lua %s", name, step, cost, replies[1], replies[0])
				}
				if states[0] != states[1] {
					t.Fatalf("%s, step %d, cost %s: the plan script left %s, mixed.lua %s", name, step, cost, states[1], states[0])
				}
			}
		}
	}
	// Denials by the tier and by the route both, and odd keys: else the
	// put-backs and the fallback would go unchecked.
	if denials < steps/10 || routeDenials < steps/20 || fallbacks < steps/10 {
		t.Fatalf("%d steps, %d denied spends (%d by the route), %d spends meeting an odd key: too few", steps, denials, routeDenials, fallbacks)
	}
	t.Logf("%d steps, %d denied spends (%d by the route), %d spends meeting an odd key", steps, denials, routeDenials, fallbacks)
}

// mixedKeyStates is each key's state (its type and value; "-" for none)
// and PEXPIRETIME, for keys of any algorithm.
func mixedKeyStates(t *testing.T, ctx context.Context, client redis.UniversalClient, keys []string) ([]string, []int64) {
	t.Helper()
	vals := make([]string, len(keys))
	exps := make([]int64, len(keys))
	for i, k := range keys {
		typ, err := client.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch typ {
		case "none":
			vals[i] = "-"
		case "string":
			vals[i] = "s:" + client.Get(ctx, k).Val()
		case "zset":
			vals[i] = fmt.Sprint("z:", client.ZRangeWithScores(ctx, k, 0, -1).Val())
		case "hash":
			vals[i] = fmt.Sprint("h:", client.HGetAll(ctx, k).Val())
		default:
			vals[i] = typ
		}
		if exps[i], err = client.Do(ctx, "PEXPIRETIME", k).Int64(); err != nil {
			t.Fatal(err)
		}
	}
	return vals, exps
}
