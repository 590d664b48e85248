package ratelimit

import "time"

// The counter scripts (sliding_window.lua, which decides the fixed window too) reply with the
// request's answer, the Redis time and, per limit, the counts it held before
// the request: the smallest reply that determines the decision. What a Decision reports
// besides them (remaining, reset, retry-after) is worked out here, with the
// same integer arithmetic and the same clock the scripts' admission uses,
// so that it stays exact to the microsecond.

// counterDecision turns one limit's value of a counter script's reply into
// its Decision. v is the limit's counts before this request (see the
// scripts' headers), -1 - them when the limit does not admit cost; nowUs is
// the script's time; spend is false for a peek.
func counterDecision(l Limit, v, nowUs, cost int64, spend bool) Decision {
	d := Decision{Limit: l, Allowed: v >= 0, At: time.UnixMicro(nowUs)}
	if !d.Allowed {
		v = -1 - v
	}
	windowUs := l.Window.Microseconds()
	elapsedUs := floorMod(nowUs, windowUs)
	leftUs := windowUs - elapsedUs
	limit := l.Count
	spent := d.Allowed && spend
	if l.Algorithm.orDefault() == FixedWindow {
		count := v
		if !d.Allowed {
			d.RetryAfter = micros(leftUs)
		}
		if spent {
			count += cost
		}
		d.Remaining = max(limit-count, 0)
		if count > 0 {
			d.ResetAfter = micros(leftUs)
		}
		return d
	}

	// The admission's clock: microseconds, or milliseconds for a long
	// limit, as the script decides it (see millisecondClock).
	unit := int64(1)
	if millisecondClock(l) {
		unit = 1000
	}
	window := windowUs / unit
	elapsed := floorMod(floorDiv(nowUs, unit), window)
	left := window - elapsed
	current, previous := v%counterBase, v/counterBase
	used := previous*left + current*window
	capacity := limit * window
	if !d.Allowed {
		// The wait ends where the script's clock reaches elapsed+wait, a
		// tick boundary: exact to the microsecond on either clock. At least
		// 1 us: a denial whose counts would fit now can only come from a
		// reply the script never sends, and must still say wait.
		wait := (elapsed+slidingRetry(limit, window, elapsed, cost, previous, current))*unit - elapsedUs
		d.RetryAfter = micros(max(wait, 1))
	}
	if spent {
		used += cost * window
		current += cost
	}
	if capacity > used {
		d.Remaining = (capacity - used) / window
	}
	switch {
	case current > 0:
		d.ResetAfter = micros(leftUs + windowUs)
	case previous > 0:
		d.ResetAfter = micros(leftUs)
	}
	return d
}

// floorDiv and floorMod divide rounding toward minus infinity, as the
// scripts' Lua arithmetic does (a time before 1970 included).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// slidingRetry is the smallest wait after which a sliding-window limit
// admits cost, with no other traffic, elapsed ticks into its window; every
// argument and the result are in the ticks of the script's clock.
func slidingRetry(limit, window, elapsed, cost, previous, current int64) int64 {
	left := window - elapsed
	// In this window: the smallest elapsed e with
	// previous*(window-e) <= room*window.
	room := limit - cost - current
	need := window
	if room >= 0 && previous > 0 {
		need = window - room*window/previous
	}
	if need < window {
		return need - elapsed
	}
	// In the next one, this window's count becomes the previous one and
	// nothing is current yet.
	needNext := int64(0)
	if current > 0 {
		needNext = max(window-(limit-cost)*window/current, 0)
	}
	if needNext < window {
		return left + needNext
	}
	return left + window
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// counterReply reports the algorithms whose scripts reply as above.
func counterReply(a Algorithm) bool {
	switch a.orDefault() {
	case SlidingWindow, FixedWindow:
		return true
	}
	return false
}

// counterBase is the fixed base both counter layouts pack a count in
// (sliding_window.lua, which decides the fixed window too): 2^21, above twice MaxCount, so
// that a count and the cost added to it by INCRBY before the admission
// is decided always fit, whatever limit the count was spent under.
const counterBase = 1 << 21
