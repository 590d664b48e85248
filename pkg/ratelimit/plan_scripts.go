package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// A plan of several sliding-window limits of one identity (a tier's
// per-second, per-minute and per-day limits, say) is decided by a script
// of its own, lua/sliding_window_plan.lua.tmpl filled in with the plan's
// counts and windows, instead of sliding_window.lua's general path: the
// same keys, layout and reply, for 0.7x to 0.8x the general path's Redis
// time (docs/design.md). A plan is fixed by configuration, so a process
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
// source for decisionReply. Safe for concurrent use.
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
	if p.byPlan == nil {
		p.byPlan = make(map[planKey]*script)
		p.bodies = make(map[string]bool)
	}
	src, err := planSource(key)
	if err != nil {
		// Arguments the Limiter formatted from a validated Limit always
		// parse; if one ever did not, the general script decides, and the
		// plan is not tried again.
		p.byPlan[key] = nil
		return nil
	}
	name := fmt.Sprintf("sliding_window_plan.lua (%d limits)", key.n)
	if key.other != 0 {
		name = fmt.Sprintf("mixed_plan.lua (%d limits, then %s)", key.n, mixedFiles[key.other])
	}
	sc = newScript(name, src)
	p.byPlan[key] = sc
	p.bodies[sc.sha()], p.bodies[src] = true, true
	return sc
}

// has reports whether body is the SHA-1 or the source of one of the plan
// scripts made so far.
func (p *planScripts) has(body string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.bodies[body]
}

// planSource is the Lua source of a plan's script: stored_forms.lua (which
// the general path reads x forms with), then its template
// (lua/sliding_window_plan.lua.tmpl, or lua/mixed_plan.lua.tmpl for a
// plan with another group) filled in by expandPlan. Every value written
// in is a decimal literal worked out here as sliding_window.lua works it
// out on each call.
func planSource(key planKey) (string, error) {
	if key.n < 1 || key.n > maxPlanLimits || key.n < 2 && key.other == 0 {
		return "", fmt.Errorf("plan of %d limits", key.n)
	}
	plan := map[string]string{
		"N": strconv.Itoa(key.n), "MsClock": "",
		"General": mustReadScript("sliding_window.lua"),
	}
	file := "sliding_window_plan.lua.tmpl"
	nowArg := 2 // ARGV's index of an injected now: after the cost
	if key.other != 0 {
		if key.other > maxMixedCode || key.otherLimits < 1 || key.otherPerLimit < 2 || key.otherPerLimit > 3 {
			return "", fmt.Errorf("plan's other group: code %d, %d limits of %d arguments", key.other, key.otherLimits, key.otherPerLimit)
		}
		file = "mixed_plan.lua.tmpl"
		plan["OtherCode"], plan["OtherKeys"], plan["OtherPerLimit"] = strconv.Itoa(key.other), strconv.Itoa(key.otherLimits), strconv.Itoa(key.otherPerLimit)
		plan["OtherFile"] = mixedFiles[key.other]
		plan["OtherSource"] = mustReadScript(mixedFiles[key.other])
		keys := make([]string, key.otherLimits)
		for i := range keys {
			keys[i] = fmt.Sprintf("KEYS[%d]", key.n+1+i)
		}
		plan["OtherKeyList"] = strings.Join(keys, ", ")
		var args strings.Builder
		m := key.otherLimits * key.otherPerLimit
		for i := range m {
			fmt.Fprintf(&args, ", ARGV[%d]", 2+i)
		}
		plan["OtherArgList"] = args.String()
		nowArg = 2 + m // after the other group's arguments
		plan["General"] = mixedRedis + mustReadScript("stored_forms.lua") + algorithmDispatch() + mustReadScript("mixed.lua")
	}
	plan["NowArg"], plan["NowArgBefore"] = strconv.Itoa(nowArg), strconv.Itoa(nowArg-1)
	limits := make([]map[string]string, key.n)
	var numbers, admit, enforced, vs, rs, tierArgs, summary []string
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
		shadow, long := count < 0, window < 0
		count, window = abs(count), abs(window)
		m := 2*count + 1
		pm := (count + 1) * m
		// The tag period as the script computes it, in doubles:
		// floor(2^53 / pm) after a rounded division.
		period := float64(1<<53) / float64(pm)
		period -= math.Mod(period, 1)
		n := strconv.Itoa(i + 1)
		l := map[string]string{
			"I": n, "Count": strconv.FormatInt(count, 10), "Window": strconv.FormatInt(window, 10),
			"M": strconv.FormatInt(m, 10), "PM": strconv.FormatInt(pm, 10),
			"Period": strconv.FormatFloat(period, 'f', 0, 64), "LW": strconv.FormatInt(count*window, 10),
			"Clock": "now", "Unit": " us", "ShadowNote": "",
			"Expiry": fmt.Sprintf("math.ceil((%d - e%s) / 1000)", 2*window, n),
		}
		note := ""
		if long {
			plan["MsClock"] = "local ms = (now - now % 1000) / 1000\n"
			l["Clock"], l["Unit"] = "ms", " ms, on the millisecond clock"
			// (2 * window - elapsed) * 1000 / 1000 in the general path:
			// whole milliseconds already.
			l["Expiry"] = fmt.Sprintf("%d - e%s", 2*window, n)
			note = " long"
		}
		if shadow {
			l["ShadowNote"] = ", shadow"
			note += " shadow"
		} else {
			enforced = append(enforced, "a"+n)
		}
		limits[i] = l
		numbers = append(numbers, "type(s"+n+") == 'number'")
		admit = append(admit, "a"+n)
		vs = append(vs, ", v"+n)
		rs = append(rs, ", r"+n)
		tierArgs = append(tierArgs, fmt.Sprintf(", '%s', '%s'", countArg, windowArg))
		summary = append(summary, l["Count"]+"/"+l["Window"]+note+"; ")
	}
	plan["AllNumbers"] = strings.Join(numbers, " and ")
	plan["AllAdmit"] = strings.Join(admit, " and ")
	plan["Enforced"] = "true"
	if len(enforced) > 0 {
		plan["Enforced"] = strings.Join(enforced, " and ")
	}
	plan["Vs"], plan["Rs"] = strings.Join(vs, ""), strings.Join(rs, "")
	plan["TierArgs"], plan["Plan"] = strings.Join(tierArgs, ""), strings.Join(summary, "")
	src, err := expandPlan(mustReadScript(file), planParts(), plan, limits)
	if err != nil {
		return "", fmt.Errorf("plan script %s: %w", file, err)
	}
	return mustReadScript("stored_forms.lua") + src, nil
}

// planParts are the parts of lua/plan_parts.lua.tmpl by name, read once.
var planParts = sync.OnceValue(func() map[string]string {
	parts := map[string]string{}
	src := mustReadScript("plan_parts.lua.tmpl")
	for {
		i := strings.Index(src, "{{define ")
		if i < 0 {
			return parts
		}
		rest := src[i+len("{{define "):]
		j := strings.Index(rest, "}}")
		k := strings.Index(rest, "{{/define}}")
		if j < 0 || k < j {
			// The file is embedded; a malformed one is a build bug.
			panic("ratelimit: lua/plan_parts.lua.tmpl: a {{define}} without its {{/define}}")
		}
		parts[rest[:j]] = rest[j+2 : k]
		src = rest[k+len("{{/define}}"):]
	}
})

// expandPlan fills in a plan template: {{part name}} puts in a part of
// plan_parts.lua.tmpl; {{each}} ... {{/each}} is repeated for every limit;
// {{Name}} is a value, the limit's inside {{each}}, else the plan's. Values
// are written as they are (Lua source among them), never read for more
// of these marks. (Not text/template: linking it keeps every exported
// method of the binary, which doubled the functions' bootstrap.)
func expandPlan(tmpl string, parts, plan map[string]string, limits []map[string]string) (string, error) {
	for {
		i := strings.Index(tmpl, "{{part ")
		if i < 0 {
			break
		}
		j := strings.Index(tmpl[i:], "}}")
		if j < 0 {
			return "", fmt.Errorf("unclosed {{part")
		}
		part, ok := parts[tmpl[i+len("{{part "):i+j]]
		if !ok {
			return "", fmt.Errorf("no part %q", tmpl[i+len("{{part "):i+j])
		}
		tmpl = tmpl[:i] + part + tmpl[i+j+2:]
	}
	var b strings.Builder
	for {
		i := strings.Index(tmpl, "{{each}}")
		if i < 0 {
			if err := fill(&b, tmpl, plan, nil); err != nil {
				return "", err
			}
			return b.String(), nil
		}
		if err := fill(&b, tmpl[:i], plan, nil); err != nil {
			return "", err
		}
		rest := tmpl[i+len("{{each}}"):]
		j := strings.Index(rest, "{{/each}}")
		if j < 0 {
			return "", fmt.Errorf("{{each}} without {{/each}}")
		}
		for _, l := range limits {
			if err := fill(&b, rest[:j], plan, l); err != nil {
				return "", err
			}
		}
		tmpl = rest[j+len("{{/each}}"):]
	}
}

// fill writes text with every {{Name}} replaced by its value, the limit's
// first.
func fill(b *strings.Builder, text string, plan, limit map[string]string) error {
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			b.WriteString(text)
			return nil
		}
		j := strings.Index(text[i:], "}}")
		if j < 0 {
			return fmt.Errorf("unclosed {{ in %.40q", text[i:])
		}
		name := text[i+2 : i+j]
		v, ok := limit[name]
		if !ok {
			v, ok = plan[name]
		}
		if !ok {
			return fmt.Errorf("no value for {{%s}}", name)
		}
		b.WriteString(text[:i])
		b.WriteString(v)
		text = text[i+j+2:]
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
