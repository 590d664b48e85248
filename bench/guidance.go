package main

import (
	"fmt"
	"strings"
)

// bucketsSection explains the sixth algorithm and its proof.
const bucketsSection = "## The sixth algorithm: sliding buckets\n\n" +
	"`sliding-buckets` (`ratelimit.SlidingBuckets`, script `pkg/ratelimit/lua/sliding_buckets.lua`) answers the issue's stretch goal: bounded memory per identity (one string of at most " +
	"K+1 = 11 small counters) and a **provable** worst case of floor(1.1 x limit) in any rolling window. It is a first-class algorithm: " +
	"`RATE_LIMIT_ALGORITHM=sliding-buckets` (or the `rateLimitAlgorithm` stage variable), or `Algorithm: ratelimit.SlidingBuckets` in a `Limit`; " +
	"it runs through `Limiter` and `Gate` by EVALSHA like the other five, and this benchmark measures it that way.\n\n" +
	"Time is cut into aligned buckets of W/K (K = 10). The key holds the units admitted in the current bucket and the K before it. " +
	"A request of cost n at time t, in bucket b, is admitted only when both hold:\n\n" +
	"- **(B)** units in buckets b-K+1..b + (units in bucket b-K) x f + n <= limit, where f is the share of bucket b-K still inside " +
	"the rolling window (t-W, t]. This is the sliding-window counter at a granularity of W/K instead of W, which keeps it close to the exact log;\n" +
	"- **(A)** units in buckets b-K..b, all counted in full + n <= floor(limit x (K+1)/K). This is what bounds the worst case.\n\n" +
	"*Proof of the bound.* A rolling window (s, s+W] meets at most K+1 consecutive buckets. Take any K+1 consecutive buckets j..j+K and " +
	"the last unit admitted in them, in bucket m. The check (A) of that admission summed buckets m-K..m, which contain j..m, and every " +
	"unit in j..j+K had been admitted by then (none comes after it, and none lies in buckets after m). So j..j+K hold at most " +
	"floor(limit x 1.1) units, and so does every rolling window. (B) counts buckets b-K+1..b in full, so the same argument shows that any K consecutive aligned buckets hold " +
	"at most the limit, which is why a burst from idle admits exactly the limit (100 of 5,000 above). The bound is tight: a full burst at the " +
	"end of one bucket followed by greedy attempts reaches exactly 110 for a limit of 100.\n\n" +
	"`pkg/ratelimit/buckets_redis_test.go`, part of `make test`, checks this through `Limiter` with an injected clock on real `redis-server`s (a single node and a 3-master cluster; " +
	"`go test ./pkg/ratelimit -run SlidingBuckets -v`): adversarial schedules (a full window packed into the last microsecond of a window or of a bucket and then refilled greedily, " +
	"bursts on both sides of bucket edges, and random mixes with costs up to the limit, for limits from 1 per 10 s to 1,000 per hour) never exceed either bound; " +
	"the tight case reaches exactly 110 and a burst from idle exactly 100; and `RetryAfter` is exact to the microsecond whether (A) or (B) is the check that denies. " +
	"Removing either check from the script makes these tests fail: without (A) the refill reaches about twice the limit, without (B) a burst from idle admits 110.\n\n" +
	"*What it costs.* (B) weighs the oldest bucket by the share of it still in the window, as if its units were spread evenly; " +
	"when they were not, it errs both ways, like the sliding-window counter but on a bucket of W/10 instead of a whole window, " +
	"and (A) caps every error on the generous side at 10%. Memory and Redis time are those of one small string key " +
	"(figures above), against the sorted-set log's one member per admitted unit; the Lua does more work than the counter's (11 counters to " +
	"parse and sum), which shows in its Redis time per decision. The bound needs the script's clock to move forward per key; Redis `TIME` does, " +
	"and a clock that steps back is treated as the newest stored bucket, which only ever counts more.\n\n"

// guidance recommends an algorithm per kind of route, quoting this run.
func guidance(res *results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	get := func(name string) *contenderResult { return find(res, name) }
	adv := func(name string) string {
		c := get(name)
		if c == nil {
			return "?"
		}
		worst := 0.0
		for _, a := range c.Attacks {
			worst = max(worst, a.MaxOverLimit)
		}
		return fmt.Sprintf("%.2fx", worst)
	}
	differ := func(name string) string {
		c := get(name)
		if c == nil || c.Accuracy == nil || c.Accuracy.Note != "" {
			return "?"
		}
		return fmt.Sprintf("%.2f%%", 100*c.Accuracy.DifferShare)
	}
	usec := func(name string) string {
		if c := get(name); c != nil {
			return fmt.Sprintf("%.1f us", redisUsec(res, c))
		}
		return "?"
	}
	bytes := func(name string) string {
		if c := get(name); c != nil && c.Memory != nil {
			return fmt.Sprintf("%.0f B", c.Memory.BytesPerIdentity)
		}
		return "?"
	}
	const (
		sw, sl, tb, lb, fw = "slidegate sliding-window", "slidegate sliding-log", "slidegate token-bucket", "slidegate leaky-bucket", "slidegate fixed-window"
	)

	w("## Which algorithm for which route\n\n")
	w("Figures from this run: worst admitted in a rolling window under the attacks / share of trace decisions that differ from the exact log / Redis time per decision (redis-benchmark, the section above, when it ran) / memory per identity.\n\n")
	w("| algorithm | worst case | differs from exact | Redis time | memory |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, n := range []string{sw, sl, tb, lb, fw, nameBuckets} {
		w("| %s | %s | %s | %s | %s |\n", n, adv(n), differ(n), usec(n), bytes(n))
	}
	w("\n")
	cheaper := "costs about the same per decision"
	if f, d := get(fw), get(sw); f != nil && d != nil && redisUsec(res, f) < 0.9*redisUsec(res, d) {
		cheaper = "is cheaper"
	}
	w("- **Login and other credential routes** (`POST /auth/*`, small limits such as 5/1m, fail-closed): the limit is a security boundary, so the worst case matters more than cost. ")
	w("Use **sliding-log** (exact: %s worst case; one sorted-set member per admitted request, which is cheap at a small limit) or **sliding-buckets** (%s worst case, at most 1.1x by proof; %s per identity whatever the limit; %s per decision against the log's %s). ", adv(sl), adv(nameBuckets), bytes(nameBuckets), usec(nameBuckets), usec(sl))
	w("Avoid fixed-window (%s at a boundary), token-bucket (%s) and the sliding-window counter (%s): each lets an attacker who times requests get close to twice the attempts the limit promises.\n", adv(fw), adv(tb), adv(sw))
	w("- **Public reads** (anonymous per-IP limits, high volume, fail-open): cost per decision and memory per identity dominate, and a brief 2x at a window edge is harmless. ")
	w("The default **sliding-window** counter (%s, %s per identity) is the sensible choice; it disagreed with the exact log on %s of the trace (the baseline two-key counter: %s), far from the \"under 0.05%%\" the design slidegate grew from claims, so do not sell it as exact. ",
		usec(sw), bytes(sw), differ(sw), differ(nameTwoKey))
	w("**fixed-window** (%s) %s and is simpler to explain, if its boundary burst (%s) is acceptable.\n", usec(fw), cheaper, adv(fw))
	w("- **Paid tiers** (per API key, large limits such as 10000/1m, customers who read the headers): customers expect bursts up to their quota and a smooth refill. ")
	w("**token-bucket** (GCRA) gives exactly that (burst = limit, then an even refill; %s, one small key whatever the limit); its %s over a rolling window is the burst the customer pays for, not an accident of window edges. ", usec(tb), adv(tb))
	w("Where a contract says \"N per rolling window\" and must hold closely, use **sliding-buckets** (`RATE_LIMIT_ALGORITHM=sliding-buckets`: at most 1.1x by proof, %s here; %s of the trace decided differently from the exact log; %s and %s per identity) rather than the sliding-log, whose memory grows with every admitted request and so with a large limit (%s per identity here, holding two requests).\n", adv(nameBuckets), differ(nameBuckets), usec(nameBuckets), bytes(nameBuckets), bytes(sl))
	w("- **leaky-bucket** spaces requests evenly (burst 1): right for calls to a fragile downstream, wrong for interactive traffic: it disagreed with the exact log on %s of the trace because it refuses every burst.\n\n", differ(lb))
	return b.String()
}

// redisUsec is a contender's Redis time per decision: the server-side
// section's median when it measured the contender, else the Go client's.
func redisUsec(res *results, c *contenderResult) float64 {
	if sc := res.ServerSide.find(c.Name); sc != nil && len(sc.Usec) > 0 {
		return sc.median()
	}
	return c.usecPerDecision()
}

// missExplanations explains, for each target this run missed, why, from
// what the benchmark measured.
func missExplanations(res *results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	missed := map[string]bool{}
	for _, t := range allTargets(res) {
		if !t.Met {
			missed[t.Name] = true
		}
	}
	if len(missed) == 0 {
		return ""
	}
	w("\nWhy:\n\n")
	def, rr, ul := find(res, nameDefault), find(res, nameRedisRate), find(res, "ulule/limiter v3 (redis)")
	timeOnly, incr, one := find(res, "ceiling: EVALSHA of TIME"), find(res, nameIncrPexpire), find(res, "ceiling: EVALSHA return 1")
	if missed["Redis time per decision (default algorithm)"] && def != nil && timeOnly != nil && incr != nil && one != nil {
		w("- **Redis time per decision.** Redis's time for a script call is the EVALSHA itself (`return 1`: %.2f us here), the commands the script runs and the interpreter's work between them. ", one.usecPerDecision())
		w("slidegate's default decision runs TIME and one INCRBY when the key already holds the current window, and replies with three integers (the remaining count, reset and retry-after are worked out on the client); ")
		w("the first request of an identity in a new window also rewrites the key (SET PX): %.2f commands per decision in this run, the EVALSHA included. ", def.commandsPerDecision())
		w("An EVALSHA that only reads TIME costs %.2f us (%.2fx INCR+PEXPIRE's %.2f us): a limiter on the Redis clock that also counts cannot go below TIME plus one write. ",
			timeOnly.usecPerDecision(), timeOnly.usecPerDecision()/incr.usecPerDecision(), incr.usecPerDecision())
		if ul != nil && def.usecPerDecision() >= ul.usecPerDecision() {
			w("ulule's store reads no clock (INCRBY, then PEXPIRE on a first hit or PTTL otherwise: %.2f us), and pays for it with a window that starts at the first request, 2x at its edge, and no retry time beyond the TTL. ", ul.usecPerDecision())
		}
		if rr != nil && def.usecPerDecision() >= rr.usecPerDecision() {
			w("redis_rate (%.2f us) runs one GCRA script with TIME, a GET and a SET, %.0f%% below slidegate's counter in this run. ",
				rr.usecPerDecision(), (1-rr.usecPerDecision()/def.usecPerDecision())*100)
		}
		w("On this machine the figure also moves between rounds by more than the margins involved (load average %s at the start; compare the median and the least disturbed round in the Redis cost table).\n", res.LoadBefore)
	}
	for _, t := range res.Targets {
		if t.Met || !strings.HasPrefix(t.Name, "decisions per second") || def == nil {
			continue
		}
		hi, best := 0, (*contenderResult)(nil)
		for _, tr := range def.Throughput {
			hi = max(hi, tr.Concurrency)
		}
		for _, c := range res.Contenders {
			if c.Group == "peer" && c.at(hi) != nil && (best == nil || c.at(hi).Median.PerSecond > best.at(hi).Median.PerSecond) {
				best = c
			}
		}
		d := def.at(hi)
		if best == nil || d == nil {
			continue
		}
		p := best.at(hi)
		w("- **Decisions per second.** On 2 shared cores, client and Redis compete for the same CPU, so decisions per second follow the CPU one decision costs on both sides together. ")
		w("At concurrency %d the default algorithm cost %.1f us of client CPU and %.1f us of Redis CPU per decision; %s cost %.1f us and %.1f us. ",
			hi, d.Median.ClientCPUus, d.Median.RedisCPUus, best.Name, p.Median.ClientCPUus, p.Median.RedisCPUus)
		w("On the client, slidegate builds its key and arguments and parses a reply of three integers per decision (%.0f allocations per `Limiter.Decide`, go-redis included, see the Lambda figures); ", res.Lambda.AllocsPerDecision)
		w("on Redis, its script does more work than the peer's (the Redis cost table). Rounds also move by tens of percent with the machine's other load (the brackets in the throughput table), so only a gap wider than those brackets means anything.\n")
	}
	if ss := res.ServerSide; ss != nil {
		b.WriteString(planMissExplanations(ss, missed))
	}
	if missed["bytes per active identity"] && def != nil && def.Memory != nil && rr != nil && rr.Memory != nil {
		w("- **Bytes per identity.** Every contender but the two-key baseline keeps one key per identity, so the difference is key and value length. ")
		w("slidegate's key names spell out the algorithm, the policy name, the count and the window (`%s`, %d bytes) so that a changed limit starts afresh; redis_rate's is `%s` (%d bytes). ",
			def.Memory.KeyExample, def.Memory.KeyBytes, rr.Memory.KeyExample, rr.Memory.KeyBytes)
		w("Redis's MEMORY USAGE of one key: %d bytes for the counter, %d for redis_rate. Dropping the count and window from the key (keeping them in the value, or a short hash of them) would remove about 20 bytes per key: a change to `pkg/ratelimit/keys.go`, which this benchmark does not own.\n",
			def.Memory.MemoryUsage, rr.Memory.MemoryUsage)
	}
	if c := res.Lambda.ColdStart; missed[coldStartTargetName] && c != nil {
		minimal, none := c.build("", true), c.build("noxray", false)
		w("- **Cold start.** The first answer spans the bootstrap's process start, its package initialisation, main's cold start (configuration and the Redis client; the first connection opens in the background and reads the live controls on it, the scripts are composed on first use and their preload waits for the first decision to be answered) and the first decision: the script call, its script composed, and the wait for the background connection and read when they have not ended. ")
		w("The `TRACER=none` bootstrap is %.1f MB (linux/arm64) against the minimal function's %.1f MB, and initialises its packages in %.1f ms against %.1f ms", float64(none.Arm64Bytes)/1e6, float64(minimal.Arm64Bytes)/1e6, median(none.InitMs), median(minimal.InitMs))
		if len(c.NoneAWSSDKInitMs) > 0 {
			w(", %.1f ms of it the AWS SDK for Go v2's packages (the Secrets Manager and API Gateway clients, linked whether or not the configuration calls AWS; the SDK's default configuration loader, with its profile, SSO, STS and sign-in clients, is no longer linked: the functions read their environment, `internal/awsclients.FromEnvironment`)", median(c.NoneAWSSDKInitMs))
		}
		w("; the rest of the %.1f ms is the larger binary's process start, main's cold start and the first decision.\n", median(none.AfterMinimalMs))
	}
	if missed["5,000 simultaneous requests at limit 100"] {
		w("- **Burst.** The contenders played in real time (the peers) take a fraction of a second to decide 5,000 requests on this machine; a token bucket with a one-minute window refills one unit every 0.6 s, so a real-time GCRA can admit one more than the limit. slidegate's algorithms are measured on a frozen virtual instant, which is what \"simultaneous\" means.\n")
	}
	return b.String()
}

// arguments is how many arguments the case's command sends after its
// SHA-1 (the key count, the keys and the script's arguments).
func (c *serverCase) arguments() int { return max(0, len(strings.Fields(c.Command))-2) }

// planMissExplanations says why the three-limit and login-path targets
// were missed, from the server-side section's figures.
func planMissExplanations(s *serverSideInfo, missed map[string]bool) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	one, three := s.find(serverPlanPrefix+"one limit"), s.find(serverPlanPrefix+"three limits")
	f1, f3 := s.find(nameFloorOne), s.find(nameFloorThree)
	if missed[threeLimitsTargetName] && one != nil && three != nil && f1 != nil && f3 != nil && len(f1.Usec) > 0 && len(f3.Usec) > 0 {
		room := 2.0*one.median() - f3.median()
		w("- **Three limits.** `sliding_window.lua` keeps one integer key per limit, so three limits are three writes: TIME, one INCRBY per key and the reply, and nothing else, already cost %.2f us, %.2fx one limit's whole decision (%.2f us). ",
			f3.median(), f3.median()/one.median(), one.median())
		w("That leaves %.2f us under 2.0x for the three limits' Lua and arguments (three limits send %d arguments, one limit %d); the script spends %.2f us over that floor, one limit %.2f us over its own. ",
			room, three.arguments(), one.arguments(), three.median()-f3.median(), one.median()-f1.median())
		w("A caller seen less than once a second finds its 1-second key expired or in an older second, which costs that key's rewrite (a SET).\n")
	}
	log, mixed := s.find(serverPlanPrefix+"sliding-log route alone"), s.find(serverPlanPrefix+"mixed: tier + route")
	ret, clock := s.find(nameReturnOne), 0.0
	if c, ok := s.clockCost(); ok {
		clock = c
	}
	if missed[loginTargetName] && one != nil && log != nil && mixed != nil && ret != nil && len(ret.Usec) > 0 {
		w("- **Login path.** One call saves one EVALSHA's fixed cost (`return 1`: %.2f us) and one TIME (%.2f us) against the two decided alone. ", ret.median(), clock)
		w("It pays for deciding before writing: the tier is peeked (a GET and its Lua) before the route spends, then spent (its INCRBY and its Lua again); every algorithm is a function the script builds per call; and its arguments (%d, against %d + %d for the two calls). ", mixed.arguments(), one.arguments(), log.arguments())
		w("Those cost %.2f us more than the savings here: %.2f us against %.2f + %.2f us.\n", mixed.median()-one.median()-log.median(), mixed.median(), one.median(), log.median())
	}
	return b.String()
}
