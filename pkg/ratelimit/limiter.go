package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
	"github.com/slidegate/slidegate/pkg/ratelimit/internal/ctlstore"
)

// Options configure a Limiter. The zero value is ready for production.
type Options struct {
	// KeyPrefix starts every key; "rl" when empty. It may not contain
	// braces.
	KeyPrefix string
	// IdentityHashKey, when set, turns identity hashing into HMAC-SHA-256
	// with this key, so that hashed IP addresses cannot be reversed by
	// hashing the whole address space. Every instance sharing the keys must
	// use the same value; changing it starts every count afresh. A Gate's
	// in-memory fallback hashes with it too.
	IdentityHashKey []byte
	// Timeout bounds one decision, all Redis round trips included. Zero
	// leaves the bound to the caller's context when the Limiter is called
	// directly, and makes a Gate around it apply 100 ms. A Gate applies
	// this same budget, once per decision.
	Timeout time.Duration
	// Now, when set, replaces Redis's clock (TIME) as the time every
	// decision is made at, and is the clock a Gate built on the Limiter
	// keeps its fallback and deny cache on. It is for tests that step time
	// to pin down an exact Retry-After or a window's edge. Leave it nil in
	// production: Redis's clock is what keeps instances whose own clocks
	// are skewed in agreement.
	Now func() time.Time
	// Controls makes decisions apply the live control of each identity
	// they check (see controls.Control), read inside the same script call: a
	// blocked identity is denied, an exempt one admitted without
	// spending, a scaled one decided against its scaled limits (see
	// Result.Control for the exact answers).
	//
	// The Limiter keeps a control watch: the tags of the identities
	// holding a control and their ends, read from the network-controls
	// hash (one HGETALL) on the decision path when older than
	// controls.Propagation, within the decision's own budget, one read in
	// flight at a time (the others use the last list; a failed read keeps
	// it, and the next is an interval later). Only a watched identity's
	// script call reads its control key; every other is the plain
	// script, exactly a Limiter's without Controls. So a control set by
	// Controls().Set applies from the first decision after the watch's next
	// read, within controls.Propagation (plus one request) on a warm
	// instance; a lift, or a change of a watched identity's control,
	// from the next decision. Before the first good read, or when more
	// than 1,000 identities hold a control (until the latest
	// control set past them ends: the Store mirrors those in one overflow
	// field), every decision reads its identity's control key
	// (an error of controls.NetworkControlCache.Get says so).
	// Without Controls, controls are neither read nor paid for.
	Controls bool
	// HashedIdentities makes an identity of the form "hash:" and 32
	// lower-case hex digits stand for the identity whose hash it is: the
	// 128 bits of its (keyed) hash that its keys carry as their hash tag,
	// in hex, as a product's logs may show them. It is for an operator's
	// tools, which know a caller only by that hash: with it, every method
	// that takes an identity (Controls().Set, Peek, Reset...) acts on that
	// caller's keys. Any other identity, a "hash:" one of another spelling
	// included, is hashed as usual. Never set it on a Limiter that decides
	// requests: an identity taken from a request could then choose its keys.
	HashedIdentities bool
}

// Check asks for one limit to be applied to one identity.
type Check struct {
	// Identity is whom the limit counts: an IP address, a user id, an API
	// key. Any bytes; it is hashed before it reaches Redis.
	Identity string
	// Limit is the budget to spend from.
	Limit Limit
	// Shadow makes the check report-only: it is decided and its Decision
	// reported like any other, but it never denies the request. A request
	// is admitted iff every check that is not a shadow admits it. When it
	// is, a shadow check spends its cost only if it admits it on its own,
	// so its state is exactly what enforcing it would have left; when the
	// request is denied, nothing is spent on any check. A shadow check and
	// an enforced one of the same identity and limit share their state.
	Shadow bool
}

// Limiter makes rate-limit decisions on Redis. It is safe for concurrent
// use and meant to be built once per process and reused.
type Limiter struct {
	client  rediser
	limits  limitCache
	keys    keyspace
	scripts scriptSet
	timeout time.Duration
	now     func() time.Time
	// controls: a script call reads its identity's control key when the
	// watch lists the identity.
	controls bool
	// watch is the process's copy of the network-controls hash, which
	// lists the identities holding a control; shared with the Limiter's
	// controls.Store and every controls.NetworkControlCache built on it.
	watch *ctlstore.Watch
	// store is what Controls returns.
	store *controls.Store
}

// NewLimiter returns a Limiter deciding on client: any go-redis v9 client
// (*redis.Client, *redis.ClusterClient, *redis.Ring, redis.UniversalClient),
// of which it uses only the few commands its scripts, resets and live
// controls need (Process for EVALSHA/EVAL, SCRIPT LOAD, pipelines, HGETALL,
// GET, GETDEL, SET, ZRANGE, TIME). It does not contact
// Redis; call LoadScripts at start to preload the scripts (EVALSHA falls
// back to EVAL on its own if they are missing).
func NewLimiter(client rediser, opts Options) (*Limiter, error) {
	if client == nil {
		return nil, fmt.Errorf("new limiter: %w: nil Redis client", ErrInvalid)
	}
	prefix := opts.KeyPrefix
	if prefix == "" {
		prefix = defaultKeyPrefix
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("new limiter: %w: %w", ErrInvalid, err)
	}
	l := &Limiter{
		client:   client,
		keys:     keyspace{prefix: prefix, hashKey: opts.IdentityHashKey, hashed: opts.HashedIdentities},
		scripts:  scriptSetFor(opts.Controls),
		timeout:  opts.Timeout,
		now:      opts.Now,
		controls: opts.Controls,
	}
	l.watch = ctlstore.NewWatch(client, l.keys.networkControlsKey(), opts.Now)
	l.store = (*controls.Store)(ctlstore.NewHandle(&ctlstore.Config{
		Client: client, Keys: l.keys.space(), Timeout: opts.Timeout, Now: opts.Now, Watch: l.watch,
	}))
	return l, nil
}

// Controls returns the Store that sets, lifts and lists the live controls
// of the Limiter's keys, on its client, with its identity hashing, timeout
// and clock. The decisions of a Limiter with Options.Controls apply them;
// a controls.NetworkControlCache built on the Store shares the Limiter's
// control watch.
func (l *Limiter) Controls() *controls.Store { return l.store }

// LoadScripts loads every script into the script cache of every node: each
// master and replica of a cluster, or the single server.
func (l *Limiter) LoadScripts(ctx context.Context) error {
	var err error
	if cluster, ok := l.client.(*redis.ClusterClient); ok {
		err = cluster.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			if err := l.scripts.loadOn(ctx, node); err != nil {
				return fmt.Errorf("node %s: %w", node.Options().Addr, err)
			}
			return nil
		})
	} else {
		err = l.scripts.loadOn(ctx, l.client)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Decide spends cost units on every check's limit if all of them admit it,
// and on none of them otherwise.
//
// Two checks on one key (the same identity and a limit of the same name,
// algorithm, count and window) are refused with ErrInvalid: they would
// spend twice on one counter, halving the limit, and a merge would have to
// guess which of their shadow flags to keep. Limits that differ in any of
// those are different keys and may be checked together.
//
// Checks of one identity share a hash tag and are decided together by one
// script call, whatever their algorithms: atomic, one round trip. Checks of
// different identities live in different slots and cannot be decided
// atomically; Decide then first peeks at every identity's group and spends
// nothing if any denies, and only then spends group by group. A concurrent request that fills a later group
// between the peek and the spend can leave the earlier groups charged for a
// request that is denied; the window is one round trip wide.
func (l *Limiter) Decide(ctx context.Context, cost int64, checks ...Check) (Result, error) {
	return l.decide(ctx, cost, true, checks)
}

// group is the set of checks decided by one script call.
type group struct {
	tag       string // empty for a lone check: runGroup hashes its identity
	algorithm Algorithm
	indexes   []int // positions in the caller's checks
}

func (l *Limiter) decide(ctx context.Context, cost int64, spend bool, checks []Check) (Result, error) {
	if err := validate(cost, checks); err != nil {
		return Result{}, err
	}
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	return l.run(ctx, cost, spend, checks)
}

// run decides checks that have been validated, within ctx's deadline: the
// one budget of the decision, which Limiter.decide or the Gate set.
func (l *Limiter) run(ctx context.Context, cost int64, spend bool, checks []Check) (Result, error) {
	res := Result{Allowed: true, Decisions: make([]Decision, len(checks))}
	var cc callControls
	if l.controls {
		cc = callControls{on: true, watch: l.watch.ForDecision(ctx)}
		cc.now = l.watch.Clock()
	}
	if len(checks) == 1 {
		// One limit: no grouping, and the tag goes straight into the key.
		ok, ctl, err := l.runGroup(ctx, cc, cost, spend, checks, group{algorithm: checks[0].Limit.Algorithm.orDefault(), indexes: singleIndex}, res.Decisions)
		if err != nil {
			return Result{}, err
		}
		res.Allowed, res.Control = ok, ctl
		return res, nil
	}
	groups := l.groupChecks(checks)
	if len(groups) == 1 {
		ok, ctl, err := l.runGroup(ctx, cc, cost, spend, checks, groups[0], res.Decisions)
		if err != nil {
			return Result{}, err
		}
		res.Allowed, res.Control = ok, ctl
		return res, nil
	}

	if sameTag(groups) {
		// One identity, several algorithms: one call decides them all.
		ok, ctl, err := l.runMixed(ctx, cc, cost, spend, checks, groups, res.Decisions)
		if err != nil {
			return Result{}, err
		}
		res.Allowed, res.Control = ok, ctl
		return res, nil
	}

	// Several slots: peek at all of them first so that a denial spends
	// nothing anywhere. Each identity's control applies to its own group;
	// a block of any of them denies the request.
	for _, g := range groups {
		ok, ctl, err := l.runGroup(ctx, cc, cost, false, checks, g, res.Decisions)
		if err != nil {
			return Result{}, err
		}
		res.Allowed = res.Allowed && ok
		res.Control = strictestControl(res.Control, ctl)
	}
	if !res.Allowed || !spend {
		return res, nil
	}
	for _, g := range groups {
		ok, ctl, err := l.runGroup(ctx, cc, cost, true, checks, g, res.Decisions)
		if err != nil {
			return Result{}, err
		}
		res.Control = strictestControl(res.Control, ctl)
		if !ok {
			res.Allowed = false
			// Later groups are reported as peeked; they spend nothing.
			return res, nil
		}
	}
	return res, nil
}

func validate(cost int64, checks []Check) error {
	if len(checks) == 0 {
		return fmt.Errorf("%w: no limits to check", ErrInvalid)
	}
	if cost < 1 {
		return fmt.Errorf("%w: cost %d is below 1", ErrInvalid, cost)
	}
	for i, c := range checks {
		if err := c.Limit.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		for _, earlier := range checks[:i] {
			if sameKey(earlier, c) {
				return fmt.Errorf("%w: limit %q (%s) is checked twice for one identity", ErrInvalid, c.Limit.Name, c.Limit)
			}
		}
		if burst := c.Limit.Burst(); cost > burst {
			return fmt.Errorf("%w: cost %d can never fit limit %q (%s %s admits at most %d at once)",
				ErrInvalid, cost, c.Limit.Name, c.Limit.Algorithm.orDefault(), c.Limit, burst)
		}
	}
	return nil
}

// sameKey reports whether two checks would count on one Redis key (see
// keySuffix): pairwise, as a request has a handful of checks.
func sameKey(a, b Check) bool {
	if a.Identity != b.Identity || a.Limit.Window != b.Limit.Window ||
		a.Limit.Algorithm.orDefault() != b.Limit.Algorithm.orDefault() {
		return false
	}
	return a.Limit.Name == b.Limit.Name || keySafeName(a.Limit.Name) == keySafeName(b.Limit.Name)
}

// groupChecks puts checks that share an identity and an algorithm into one
// group, keeping the order in which groups first appear.
func (l *Limiter) groupChecks(checks []Check) []group {
	groups := make([]group, 0, 1)
	tags := make(map[string]string, len(checks))
	for i, c := range checks {
		tag, seen := tags[c.Identity]
		if !seen {
			tag = l.keys.identityTag(c.Identity)
			tags[c.Identity] = tag
		}
		alg := c.Limit.Algorithm.orDefault()
		found := false
		for gi := range groups {
			if groups[gi].tag == tag && groups[gi].algorithm == alg {
				groups[gi].indexes = append(groups[gi].indexes, i)
				found = true
				break
			}
		}
		if !found {
			groups = append(groups, group{tag: tag, algorithm: alg, indexes: []int{i}})
		}
	}
	return groups
}

// singleIndex is the indexes of a group of one check; never written.
var singleIndex = []int{0}

// runGroup makes one script call for a group and fills in its decisions;
// it returns the group's answer and the control that applied to it. A
// group whose identity may hold a control is decided by the controlled
// mixed script, as one group (runMixed): one controlled script for every
// shape.
func (l *Limiter) runGroup(ctx context.Context, cc callControls, cost int64, spend bool, checks []Check, g group, out []Decision) (bool, controls.Applied, error) {
	sc := l.scripts.forAlgorithm(g.algorithm)
	if cc.any() || sc == nil {
		if g.tag == "" {
			g.tag = l.keys.identityTag(checks[g.indexes[0]].Identity)
		}
		if sc == nil || cc.reads(g.tag) {
			// The fixed window, or an identity that may hold a control:
			// the mixed script, one group.
			return l.runMixed(ctx, cc, cost, spend, checks, []group{g}, out)
		}
	}
	n := len(g.indexes)
	// The whole command in one slice: verb, script, key count, KEYS, ARGV.
	cmd := make([]any, 0, 6+n*(1+limitArgs(g.algorithm)))
	cmd = append(cmd, nil, nil, n)
	cmd = l.appendKeys(cmd, checks, g)
	cmd = append(cmd, costArg(cost, spend))
	cmd = l.appendLimitArgs(cmd, checks, g)
	if l.now != nil {
		cmd = append(cmd, strconv.FormatInt(l.now().UnixMicro(), 10))
	}
	vals, err := sc.run(ctx, l.client, cmd)
	if err != nil {
		return false, controls.Applied{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	ok, err := groupDecisions(vals, cost, spend, checks, g, 0, out)
	return ok, controls.Applied{}, err
}

// callControls is what one decision knows of the live controls: whether
// its Limiter reads them, and the watch's list at the decision's start.
type callControls struct {
	on    bool
	watch *ctlstore.State
	now   time.Time
}

// any reports whether some identity's control key may need reading.
func (cc callControls) any() bool { return cc.on && !cc.watch.None() }

// reads reports whether the call for tag reads its control key.
func (cc callControls) reads(tag string) bool { return cc.on && cc.watch.Controlled(tag, cc.now) }

// sameTag reports whether every group counts the same identity: one slot.
func sameTag(groups []group) bool {
	for _, g := range groups[1:] {
		if g.tag != groups[0].tag {
			return false
		}
	}
	return true
}

// runMixed decides groups of one identity that use different algorithms
// with one call of the mixed script (lua/mixed.lua): all or nothing, like
// one group. It decides one group too: a fixed-window group (the fixed
// window has no script of its own), and any group of an identity whose
// control key is read (the controlled script).
func (l *Limiter) runMixed(ctx context.Context, cc callControls, cost int64, spend bool, checks []Check, groups []group, out []Decision) (bool, controls.Applied, error) {
	script := l.scripts.mixed
	keys := 0
	for _, g := range groups {
		keys += len(g.indexes)
	}
	controlled := cc.any() && cc.reads(groups[0].tag)
	if controlled {
		script = l.scripts.controlled
		keys++
	}
	cmd := make([]any, 0, 9+keys*4+len(groups)*3)
	cmd = append(cmd, nil, nil, keys)
	for _, g := range groups {
		cmd = l.appendKeys(cmd, checks, g)
	}
	if controlled {
		cmd = append(cmd, l.keys.controlKey(groups[0].tag))
	}
	cmd = append(cmd, costArg(cost, spend))
	cmd = append(cmd, len(groups))
	for _, g := range groups {
		cmd = append(cmd, mixedCode(g.algorithm), len(g.indexes), limitArgs(g.algorithm))
		cmd = l.appendLimitArgs(cmd, checks, g)
	}
	if l.now != nil {
		cmd = append(cmd, strconv.FormatInt(l.now().UnixMicro(), 10))
	}
	vals, err := script.run(ctx, l.client, cmd)
	if err != nil {
		return false, controls.Applied{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !controlled {
		ok, err := mixedDecisions(vals, cost, spend, checks, groups, 0, out)
		return ok, controls.Applied{}, err
	}
	body, ctl, err := splitControl(vals, mixedReplyLen(groups))
	if err != nil {
		return false, controls.Applied{}, err
	}
	if len(groups) == 1 && ctl.kind != controlBlock {
		// One group: its own reply follows the mixed script's answer
		// and time.
		body = body[2:]
	}
	return controlledDecisions(body, ctl, cost, spend, checks, groups, out)
}

// mixedReplyLen is the length of the mixed script's reply: its answer, the
// Redis time, then each group's reply, flat.
func mixedReplyLen(groups []group) int {
	n := 2
	for _, g := range groups {
		n += groupReplyLen(g)
	}
	return n
}

// mixedDecisions fills in the decisions of the mixed script's reply: its
// answer, the Redis time, then each group's reply, one after the other in
// the same array (lua/mixed.lua). milli is a scale control's factor, 0 for
// none.
func mixedDecisions(vals []any, cost int64, spend bool, checks []Check, groups []group, milli int64, out []Decision) (bool, error) {
	if want := mixedReplyLen(groups); len(vals) != want {
		return false, fmt.Errorf("%w: script reply has %d values, want %d", ErrUnavailable, len(vals), want)
	}
	allowed, ok := vals[0].(int64)
	if !ok {
		return false, fmt.Errorf("%w: script reply value 0 is %T, want an integer", ErrUnavailable, vals[0])
	}
	at := 2
	for _, g := range groups {
		n := groupReplyLen(g)
		// A denied request's groups answered as peeks.
		if _, err := groupDecisions(vals[at:at+n], cost, spend && allowed == 1, checks, g, milli, out); err != nil {
			return false, fmt.Errorf("group at reply value %d: %w", at, err)
		}
		at += n
	}
	return allowed == 1, nil
}

// appendKeys appends the keys of a group's limits to cmd.
func (l *Limiter) appendKeys(cmd []any, checks []Check, g group) []any {
	for _, ci := range g.indexes {
		c := checks[ci]
		e := l.limits.get(c.Limit)
		if g.tag == "" {
			cmd = append(cmd, l.keys.keyForIdentity(c.Identity, e.suffix))
		} else {
			cmd = append(cmd, l.keys.keyWithSuffix(g.tag, e.suffix))
		}
	}
	return cmd
}

// appendLimitArgs appends the script arguments of a group's limits to cmd.
func (l *Limiter) appendLimitArgs(cmd []any, checks []Check, g group) []any {
	stride := limitArgs(g.algorithm)
	for _, ci := range g.indexes {
		c := checks[ci]
		args := &l.limits.get(c.Limit).args
		if c.Shadow {
			args = &l.limits.get(c.Limit).shadowArgs
		}
		cmd = append(cmd, args[:stride]...)
	}
	return cmd
}

// groupDecisions fills in the decisions of a group from its script's reply
// and returns the group's answer. milli is the factor, in thousandths, of
// the scale control the script applied, 0 for none: the limits were then
// decided, and are reported, with their scaled counts (scaledLimit).
func groupDecisions(vals []any, cost int64, spend bool, checks []Check, g group, milli int64, out []Decision) (bool, error) {
	for i, v := range vals {
		if _, ok := v.(int64); !ok {
			return false, fmt.Errorf("%w: script reply value %d is %T, want an integer", ErrUnavailable, i, v)
		}
	}
	if counterReply(g.algorithm) {
		return counterDecisions(vals, cost, spend, checks, g.indexes, milli, out)
	}
	n := len(g.indexes)
	if len(vals) != 2+4*n {
		return false, fmt.Errorf("%w: script reply has %d values, want %d", ErrUnavailable, len(vals), 2+4*n)
	}
	at := time.UnixMicro(vals[1].(int64))
	for i, ci := range g.indexes {
		f := vals[2+4*i : 6+4*i]
		out[ci] = Decision{
			Limit:      scaledLimit(checks[ci].Limit, milli),
			Allowed:    f[0].(int64) == 1,
			Remaining:  f[1].(int64),
			ResetAfter: time.Duration(f[2].(int64)) * time.Microsecond,
			RetryAfter: time.Duration(f[3].(int64)) * time.Microsecond,
			At:         at,
			Shadow:     checks[ci].Shadow,
		}
	}
	return vals[0].(int64) == 1, nil
}

// counterDecisions fills in the decisions of a counter script's reply
// (counters.go): the request's answer, the Redis time, then one value per
// limit.
func counterDecisions(vals []any, cost int64, spend bool, checks []Check, indexes []int, milli int64, out []Decision) (bool, error) {
	if len(vals) != 2+len(indexes) {
		return false, fmt.Errorf("%w: script reply has %d values, want %d", ErrUnavailable, len(vals), 2+len(indexes))
	}
	now := vals[1].(int64)
	// A denied request spent nothing: a limit that admitted it on its own
	// reports what it has left, as a peek would.
	spend = spend && vals[0].(int64) == 1
	for i, ci := range indexes {
		c := checks[ci]
		out[ci] = counterDecision(scaledLimit(c.Limit, milli), vals[2+i].(int64), now, cost, spend)
		out[ci].Shadow = c.Shadow
	}
	return vals[0].(int64) == 1, nil
}

// limitArgs is how many ARGV values each limit takes in an algorithm's
// script: count and window, and for GCRA the burst.
func limitArgs(a Algorithm) int {
	switch a.orDefault() {
	case TokenBucket, LeakyBucket:
		return 3
	}
	return 2
}

// costArg is the scripts' ARGV[1]: the cost, negated for a peek. The
// common costs of 1 are constants, neither formatted nor boxed anew.
func costArg(cost int64, spend bool) any {
	switch {
	case cost == 1 && spend:
		return "1"
	case cost == 1:
		return "-1"
	case spend:
		return strconv.FormatInt(cost, 10)
	}
	return strconv.FormatInt(-cost, 10)
}

// limitEntry is what a decision needs of a limit besides its identity: the
// end of its keys and its script arguments, formatted and boxed.
type limitEntry struct {
	suffix string
	args   [3]any // count, window (in microseconds, or see millisecondClock), burst
	// shadowArgs are args for a shadow check: the count negated, which is
	// how the scripts tell a shadow limit.
	shadowArgs [3]any
}

// limitCache keeps the entries of recently used limits: a process uses a
// handful of limits, and building them for every decision was a third of
// its allocations. Bounded; past the bound, entries are built anew.
type limitCache struct {
	mu      sync.RWMutex
	entries map[Limit]*limitEntry
}

const maxCachedLimits = 1024

func (c *limitCache) get(l Limit) *limitEntry {
	c.mu.RLock()
	e, ok := c.entries[l]
	c.mu.RUnlock()
	if ok {
		return e
	}
	window := strconv.FormatInt(l.Window.Microseconds(), 10)
	if millisecondClock(l) {
		// The sliding-window script's mark of a long limit.
		window = strconv.FormatInt(-l.Window.Milliseconds(), 10)
	}
	e = &limitEntry{
		suffix: keySuffix(l),
		args: [3]any{
			strconv.FormatInt(l.Count, 10),
			window,
			strconv.FormatInt(l.Burst(), 10),
		},
	}
	e.shadowArgs = e.args
	e.shadowArgs[0] = strconv.FormatInt(-l.Count, 10)
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[Limit]*limitEntry)
	}
	if len(c.entries) < maxCachedLimits {
		c.entries[l] = e
	}
	c.mu.Unlock()
	return e
}
