package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"text/template"
)

// A plan of several sliding-window limits of one identity (a tier's
// per-second, per-minute and per-day limits, say) is decided by a script
// of its own, lua/sliding_window_plan.lua.tmpl filled in with the plan's
// counts and windows, instead of sliding_window.lua's general path: the
// same keys, layout and reply, for about two thirds of the Redis time (see
// docs/benchmarks.md). A plan is fixed by configuration, so a process
// makes a handful of these scripts; they are made on first use and kept
// for the process's life, and a Limiter loads each into its nodes on its
// first decision of the plan (Limiter.loadPlan).

const (
	// maxPlanLimits is the most limits a plan script decides; a group of
	// more goes to sliding_window.lua (a script's locals are bounded, and
	// plans that large are not what configurations hold).
	maxPlanLimits = 8
	// maxPlanScripts bounds the plan scripts a process makes, and so what
	// it adds to each node's script cache: past it, a plan not yet seen is
	// decided by sliding_window.lua, which decides any plan. A library
	// caller that builds limits per request (counts read from a database)
	// cannot grow it without end.
	maxPlanScripts = 64
)

// planKey names a plan: its limits' count and window arguments, in order,
// exactly as sliding_window.lua would be sent them (a shadow limit's count
// negated, a long limit's window negated in milliseconds). An array, so
// that looking a plan up allocates nothing.
type planKey struct {
	n    int
	args [2 * maxPlanLimits]string
	// other is the mixedCode of the group after the sliding-window one
	// (mixed_plan.lua.tmpl), 0 for none; otherLimits its number of limits
	// and otherPerLimit its arguments per limit, which the call sends.
	other, otherLimits, otherPerLimit int
}

// planScripts holds the process's plan scripts: by plan, and by SHA-1 and
// source for DecisionReply. Safe for concurrent use.
type planScripts struct {
	mu     sync.RWMutex
	byPlan map[planKey]*script
	bodies map[string]bool
}

// get is the script of a plan, made on first use; nil past maxPlanScripts
// or for a plan that cannot have one (the caller then sends the general
// script).
func (p *planScripts) get(key planKey) *script {
	p.mu.RLock()
	sc, ok := p.byPlan[key]
	p.mu.RUnlock()
	if ok {
		return sc
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if sc, ok := p.byPlan[key]; ok {
		return sc
	}
	if len(p.byPlan) >= maxPlanScripts {
		return nil
	}
	src, err := planSource(key)
	if err != nil {
		// Arguments the Limiter formatted from a validated Limit always
		// parse; if one ever did not, the general script still decides.
		return nil
	}
	name := fmt.Sprintf("sliding_window_plan.lua (%d limits)", key.n)
	if key.other != 0 {
		name = fmt.Sprintf("mixed_plan.lua (%d limits, then %s)", key.n, mixedFiles[key.other])
	}
	made := newScript(name, src)
	sc = &made
	if p.byPlan == nil {
		p.byPlan = make(map[planKey]*script)
		p.bodies = make(map[string]bool)
	}
	p.byPlan[key] = sc
	p.bodies[sc.sha], p.bodies[sc.src] = true, true
	return sc
}

// has reports whether body is the SHA-1 or the source of one of the plan
// scripts made so far.
func (p *planScripts) has(body string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.bodies[body]
}

// planTemplates are the templates of lua/*.tmpl, parsed on first use.
var planTemplates = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("").ParseFS(luaFiles, "lua/*.tmpl"))
})

// planLimit is what the template writes of one limit: every value a
// decimal literal, worked out here as sliding_window.lua works it out on
// each call.
type planLimit struct {
	I                   int
	CountArg, WindowArg string // the arguments sliding_window.lua takes
	Count, Window       string // the count, and the window in its clock's unit
	M, PM, Period, LW   string
	Clock               string // now or ms: the clock the limit is decided on
	Expiry              string // the PX of a key rewritten for this window
	Shadow, Long        bool
}

// planData is what the templates are filled in with.
type planData struct {
	N        int // the sliding-window group's limits
	Limits   []planLimit
	AnyLong  bool
	Enforced string // Lua: whether every enforced limit admits
	NowArg   int    // ARGV's index of the injected now
	// NowArgBefore is NowArg - 1, the last of the other group's arguments.
	NowArgBefore int
	// General is the script that decides what the plan's own code does
	// not: sliding_window.lua, or (with another group) mixed.lua composed.
	General string
	// The other group, after the sliding-window one (mixed_plan.lua.tmpl).
	OtherCode, OtherKeys, OtherPerLimit int
	OtherFile, OtherSource              string
	OtherKeyList, OtherArgList          string // Lua: its KEYS; its ARGV, each after ", "
}

// planSource is the Lua source of a plan's script: stored_forms.lua (which
// the general path reads x forms with), then the filled-in template.
func planSource(key planKey) (string, error) {
	if key.n < 1 || key.n > maxPlanLimits || key.n < 2 && key.other == 0 {
		return "", fmt.Errorf("plan of %d limits", key.n)
	}
	data := planData{N: key.n, NowArg: 2, General: mustReadScript("sliding_window.lua")}
	name := "sliding_window_plan.lua.tmpl"
	if key.other != 0 {
		if key.other < 1 || key.other > maxMixedCode || key.otherLimits < 1 || key.otherPerLimit < 2 || key.otherPerLimit > 3 {
			return "", fmt.Errorf("plan's other group: code %d, %d limits of %d arguments", key.other, key.otherLimits, key.otherPerLimit)
		}
		name = "mixed_plan.lua.tmpl"
		data.OtherCode, data.OtherKeys, data.OtherPerLimit = key.other, key.otherLimits, key.otherPerLimit
		data.OtherFile = mixedFiles[key.other]
		data.OtherSource = mustReadScript(data.OtherFile)
		keys := make([]string, key.otherLimits)
		for i := range keys {
			keys[i] = fmt.Sprintf("KEYS[%d]", key.n+1+i)
		}
		data.OtherKeyList = strings.Join(keys, ", ")
		m := key.otherLimits * key.otherPerLimit
		for i := range m {
			data.OtherArgList += fmt.Sprintf(", ARGV[%d]", 2+i)
		}
		data.NowArg = 2 + m
		data.General = mixedRedis + mustReadScript("stored_forms.lua") + algorithmDispatch() + mustReadScript("mixed.lua")
	}
	data.NowArgBefore = data.NowArg - 1
	var enforced []string
	for i := range key.n {
		countArg, windowArg := key.args[2*i], key.args[2*i+1]
		count, err := strconv.ParseInt(countArg, 10, 64)
		if err != nil || count == 0 {
			return "", fmt.Errorf("limit %d: count %q", i+1, countArg)
		}
		window, err := strconv.ParseInt(windowArg, 10, 64)
		if err != nil || window == 0 {
			return "", fmt.Errorf("limit %d: window %q", i+1, windowArg)
		}
		l := planLimit{I: i + 1, CountArg: countArg, WindowArg: windowArg, Shadow: count < 0, Long: window < 0, Clock: "now"}
		count, window = abs(count), abs(window)
		m := 2*count + 1
		pm := (count + 1) * m
		// The tag period as the script computes it, in doubles:
		// floor(2^53 / pm) after a rounded division.
		period := float64(1<<53) / float64(pm)
		period -= math.Mod(period, 1)
		l.Count, l.Window = strconv.FormatInt(count, 10), strconv.FormatInt(window, 10)
		l.M, l.PM = strconv.FormatInt(m, 10), strconv.FormatInt(pm, 10)
		l.Period = strconv.FormatFloat(period, 'f', 0, 64)
		l.LW = strconv.FormatInt(count*window, 10)
		if l.Long {
			data.AnyLong = true
			l.Clock = "ms"
			// (2 * window - elapsed) * 1000 / 1000 in the general path:
			// whole milliseconds already.
			l.Expiry = fmt.Sprintf("%d - e%d", 2*window, l.I)
		} else {
			l.Expiry = fmt.Sprintf("math.ceil((%d - e%d) / 1000)", 2*window, l.I)
		}
		if !l.Shadow {
			enforced = append(enforced, "a"+strconv.Itoa(l.I))
		}
		data.Limits = append(data.Limits, l)
	}
	data.Enforced = "true"
	if len(enforced) > 0 {
		data.Enforced = strings.Join(enforced, " and ")
	}
	var b strings.Builder
	b.WriteString(mustReadScript("stored_forms.lua"))
	if err := planTemplates().ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("plan script: %w", err)
	}
	return b.String(), nil
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
