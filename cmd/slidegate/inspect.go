package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slidegate/slidegate/internal/awsclients/sdkconfig"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/network"
	"github.com/slidegate/slidegate/internal/operator"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// callerFlags name the caller to inspect or reset.
type callerFlags struct {
	ip, apiKey, apiKeyHash, sub, id, tier, plan string
}

func (f *callerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ip, "ip", "", "an anonymous caller's source `address` (IPv6: counted per the stage's prefix)")
	fs.StringVar(&f.apiKey, "api-key", "", "an API `key` (tier org); prefer --api-key-hash to keep it out of shell history")
	fs.StringVar(&f.apiKeyHash, "api-key-hash", "", "an API key's SHA-256 `hex` (tier org), as in API_KEY_HASHES")
	fs.StringVar(&f.sub, "sub", "", "a verified JWT's `subject` (tier user)")
	fs.StringVar(&f.id, "identity", "", "a caller's `identity` as the logs, Contributor Insights and the dashboard print it (32 hex digits), or as the functions count it (ip:, key:, sub:)")
	fs.StringVar(&f.tier, "tier", "", "with --identity and a hash: the caller's `tier` (anonymous, user or org), as its log line's \"tier\" says; inspect and reset need it to know the caller's limits")
	fs.StringVar(&f.plan, "plan", "", "the caller's `plan` where the functions learn it from AWS or a token (its key's usage plan, its token's plan claim); an API_KEY_HASHES key's plan and an --ip's network are found without it")
}

// caller resolves the flags into the caller the functions count: its tier
// and identity. An --identity given as its hash has the tier --tier says,
// or none ("": the controls need none; inspect and reset ask for it).
func (f callerFlags) caller(ipv6Prefix int) (identity.Caller, error) {
	given := 0
	for _, v := range []string{f.ip, f.apiKey, f.apiKeyHash, f.sub, f.id} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		return identity.Caller{}, fmt.Errorf("give exactly one of --ip, --api-key, --api-key-hash, --sub, --identity")
	}
	if f.tier != "" && f.id == "" {
		return identity.Caller{}, fmt.Errorf("--tier goes with --identity; the other flags say the tier")
	}
	// Every flag is read by identity.CanonicalIdentity, as the operator
	// function reads the identity it is sent: one reading of a caller for
	// every way into the controls.
	switch {
	case f.id != "":
		return f.identityCaller(ipv6Prefix)
	case f.ip != "":
		id, err := identity.CanonicalIdentity(identity.KindIP+f.ip, ipv6Prefix)
		if err != nil || strings.Contains(f.ip, "/") {
			return identity.Caller{}, fmt.Errorf("--ip %q: not an IP address", truncate.Text(f.ip, truncate.QuotedLen))
		}
		return identity.Caller{Tier: identity.TierAnonymous, Identity: id}, nil
	case f.apiKey != "":
		return identity.Caller{Tier: identity.TierOrg, Identity: identity.KindKey + identity.KeyHash(f.apiKey)}, nil
	case f.apiKeyHash != "":
		id, err := identity.CanonicalIdentity(identity.KindKey+f.apiKeyHash, ipv6Prefix)
		if err != nil {
			return identity.Caller{}, fmt.Errorf("--api-key-hash %q: want 64 hex digits (the key's SHA-256)", truncate.Text(f.apiKeyHash, truncate.QuotedLen))
		}
		return identity.Caller{Tier: identity.TierOrg, Identity: id}, nil
	default:
		id, err := identity.CanonicalIdentity(identity.KindSubject+f.sub, ipv6Prefix)
		if err != nil {
			return identity.Caller{}, fmt.Errorf("--sub: %w", err)
		}
		return identity.Caller{Tier: identity.TierUser, Identity: id}, nil
	}
}

// identityCaller is caller for --identity: its kind says its tier, or,
// for a hash, --tier does.
func (f callerFlags) identityCaller(ipv6Prefix int) (identity.Caller, error) {
	id, err := identity.CanonicalIdentity(f.id, ipv6Prefix)
	if err != nil {
		return identity.Caller{}, fmt.Errorf("--identity: %w", err)
	}
	tier := ""
	switch {
	case strings.HasPrefix(id, identity.KindIP):
		tier = identity.TierAnonymous
	case strings.HasPrefix(id, identity.KindKey):
		tier = identity.TierOrg
	case strings.HasPrefix(id, identity.KindSubject):
		tier = identity.TierUser
	}
	switch {
	case f.tier == "" || f.tier == tier:
	case tier != "":
		return identity.Caller{}, fmt.Errorf("--tier %q: identity %s is counted in tier %s", truncate.Text(f.tier, truncate.QuotedLen), truncate.Text(id, truncate.QuotedLen), tier)
	case f.tier == identity.TierAnonymous || f.tier == identity.TierUser || f.tier == identity.TierOrg:
		tier = f.tier
	default:
		return identity.Caller{}, fmt.Errorf("--tier %q: want anonymous, user or org", truncate.Text(f.tier, truncate.QuotedLen))
	}
	return identity.Caller{Tier: tier, Identity: id}, nil
}

// sourceIP is the address of an anonymous caller, for its network: --ip,
// or the address of an --identity of kind ip ("" for any other).
func (f callerFlags) sourceIP(c identity.Caller) string {
	if f.ip != "" {
		return f.ip
	}
	rest, ok := strings.CutPrefix(c.Identity, identity.KindIP)
	if !ok || rest == identity.InvalidSource {
		return ""
	}
	addr, _, _ := strings.Cut(rest, "/")
	return addr
}

// planOf is the caller's plan: --plan, else an org caller's API_KEY_HASHES
// plan (keyPlans), else none.
func (f callerFlags) planOf(c identity.Caller, keyPlans map[string]string) (string, error) {
	if f.plan != "" {
		p, ok := identity.NormalizePlan(f.plan)
		if !ok {
			return "", fmt.Errorf("--plan %q: not a plan name (letters, digits, underscores)", truncate.Text(f.plan, truncate.QuotedLen))
		}
		return p, nil
	}
	if h, ok := strings.CutPrefix(c.Identity, identity.KindKey); ok {
		return keyPlans[h], nil
	}
	return "", nil
}

// callerChecks are every limit that counts the caller, resolved as the
// functions resolve it (policy.Stage.CallerRules: its network, its plan, its
// tier beneath a plan in shadow): its own, every route limit (a request
// counts against those its route matches) and the quota route's limit.
func callerChecks(pol policy.Stage, c identity.Caller, sourceIP string) (policy.CallerRules, []ratelimit.Check) {
	rules := pol.CallerRules(c, sourceIP)
	var checks []ratelimit.Check
	for _, l := range pol.EveryLimit(rules) {
		checks = append(checks, ratelimit.Check{Identity: c.Identity, Limit: l.Limit})
	}
	return rules, checks
}

// callerCommand is what inspect and reset share: the flags, the stage's
// configuration, the caller and the connection.
type callerCommand struct {
	stage   stageFlags
	caller  callerFlags
	json    bool
	timeout time.Duration
	yes     bool
}

func parseCallerCommand(name string, args []string, e env, withJSON, withYes bool) (*callerCommand, error) {
	fs := flag.NewFlagSet("slidegate "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	c := &callerCommand{}
	c.stage.register(fs, e.getenv)
	c.caller.register(fs)
	fs.DurationVar(&c.timeout, "timeout", operator.DefaultTimeout, "bound on connecting to Redis and on each command")
	if withJSON {
		fs.BoolVar(&c.json, "json", false, "print JSON, for scripts")
	}
	if withYes {
		fs.BoolVar(&c.yes, "yes", false, "do not ask for confirmation")
	}
	if err := fs.Parse(args); err != nil {
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "slidegate %s: unexpected argument %q\n", name, fs.Arg(0))
		fs.Usage()
		return nil, errUsage
	}
	return c, nil
}

// connect reads the stage, resolves the caller and connects to Redis.
func (c *callerCommand) connect(ctx context.Context, e env) (*stageConfig, identity.Caller, *operator.Conn, error) {
	sc, caller, err := c.resolve(e)
	if err != nil {
		return nil, identity.Caller{}, nil, err
	}
	op, err := connectStage(ctx, sc, c.timeout, e)
	if err != nil {
		return nil, identity.Caller{}, nil, err
	}
	return sc, caller, op, nil
}

// resolve reads the stage and resolves the caller as the functions count
// it: the one resolution inspect, reset and the control commands share.
func (c *callerCommand) resolve(e env) (*stageConfig, identity.Caller, error) {
	sc, err := readStage(c.stage, e)
	if err != nil {
		return nil, identity.Caller{}, err
	}
	caller, err := c.caller.caller(sc.limits.IPv6Prefix)
	if err != nil {
		fmt.Fprintln(e.stderr, "slidegate:", err)
		return nil, identity.Caller{}, errUsage
	}
	if caller.Plan, err = c.caller.planOf(caller, sc.cfg.APIKeyPlans); err != nil {
		fmt.Fprintln(e.stderr, "slidegate:", err)
		return nil, identity.Caller{}, errUsage
	}
	return sc, caller, nil
}

// readStage reads the API function's configuration of a stage and tells
// what it could not use.
func readStage(f stageFlags, e env) (*stageConfig, error) {
	sc, err := loadStage(f, e.getenv, apiFunction, false)
	if err != nil {
		return nil, err
	}
	for _, msg := range sc.warnings {
		fmt.Fprintln(e.stderr, "warning:", msg)
	}
	// Bad values are used as the functions use them (replaced by their
	// default); say so, as their log would.
	for _, msg := range append(errorList(sc.cfgErr), errorList(sc.stageErr)...) {
		fmt.Fprintln(e.stderr, "warning: bad configuration value:", msg)
	}
	return sc, nil
}

// connectStage connects to the stage's Redis as the functions do.
func connectStage(ctx context.Context, sc *stageConfig, timeout time.Duration, e env) (*operator.Conn, error) {
	op, err := operator.Connect(ctx, sc.cfg, operator.Options{Timeout: timeout, AWSConfig: sdkconfig.Load})
	if err != nil {
		return nil, err
	}
	if !op.Keyed {
		fmt.Fprintln(e.stderr, "warning: no identity hash key (RATE_LIMIT_HASH_KEY_SECRET_ARN or RATE_LIMIT_HASH_KEY): keys are read as plain SHA-256, which matches only functions that have no key either")
	}
	return op, nil
}

// limitState is one limit of the caller as inspect prints it.
type limitState struct {
	Name              string `json:"name"`
	Limit             string `json:"limit"`
	Count             int64  `json:"count"`
	WindowSeconds     int64  `json:"windowSeconds"`
	Algorithm         string `json:"algorithm"`
	Used              int64  `json:"used"`
	Remaining         int64  `json:"remaining"`
	ResetSeconds      int64  `json:"resetSeconds"`
	RetryAfterSeconds int64  `json:"retryAfterSeconds"`
	Allowed           bool   `json:"allowed"`
}

// inspection is inspect's answer.
type inspection struct {
	Stage string `json:"stage"`
	// EnvironmentOnly is true when no stage files were found: the limits
	// are the environment's (and defaults), not Stage's.
	EnvironmentOnly bool   `json:"environmentOnly,omitempty"`
	Tier            string `json:"tier"`
	// Plan is the plan whose limits count the caller ("" for its tier's),
	// UnknownPlan one it carries that the stage does not configure, and
	// Network its source network's verdict (unlimited, blocked, a plan).
	Plan        string       `json:"plan,omitempty"`
	UnknownPlan string       `json:"unknownPlan,omitempty"`
	Network     string       `json:"network,omitempty"`
	Owner       string       `json:"owner"`
	Identity    string       `json:"identity"`
	Hash        string       `json:"hash"`
	Allowed     bool         `json:"allowed"`
	Limits      []limitState `json:"limits"`
	// InFlight are the caller's in-flight limits (RATE_LIMIT_CONCURRENCY)
	// and the slots it holds; omitted when none applies.
	InFlight []slotState `json:"inFlight,omitempty"`
	// Control is the caller's live control (slidegate block, exempt,
	// scale), Networks the network controls covering an --ip; omitted
	// when none.
	Control  *operator.ControlView  `json:"control,omitempty"`
	Networks []operator.ControlView `json:"networkControls,omitempty"`
}

// slotState is one in-flight limit of the caller as inspect prints it.
type slotState struct {
	Name string `json:"name"`
	Max  int64  `json:"max"`
	Held int64  `json:"held"`
	// LeaseEndsSeconds are how long until the earliest and the latest
	// slot held ends its lease (0 when none is held), on Redis's clock.
	EarliestLeaseEndSeconds int64 `json:"earliestLeaseEndSeconds"`
	LatestLeaseEndSeconds   int64 `json:"latestLeaseEndSeconds"`
}

// peekSlots reads the caller's in-flight slots, resolved as the functions
// resolve them (policy.Stage.EveryInFlight): its plan's or tier's entry
// and every route entry (a request holds those its route matches).
func peekSlots(ctx context.Context, op *operator.Conn, pol policy.Stage, rules policy.CallerRules, id string) ([]slotState, error) {
	var out []slotState
	for _, e := range pol.EveryInFlight(rules) {
		// The lease is not part of the key: any valid one reads the set.
		e.Lease = time.Minute
		p, err := op.Gate.PeekSlots(ctx, id, e)
		if err == nil && p.Degraded {
			// The Gate's local count is no answer for an operator.
			err = p.Cause
		}
		if err != nil {
			return nil, fmt.Errorf("peek in-flight slots: %w", err)
		}
		st := slotState{Name: e.Name, Max: e.Max, Held: p.Held}
		if p.Held > 0 {
			st.EarliestLeaseEndSeconds = httplimit.RetryAfterSeconds(p.EarliestEnd.Sub(p.At))
			st.LatestLeaseEndSeconds = httplimit.RetryAfterSeconds(p.LatestEnd.Sub(p.At))
		}
		out = append(out, st)
	}
	return out, nil
}

// peekCaller reads every limit of the caller without spending anything.
func peekCaller(ctx context.Context, op *operator.Conn, sc *stageConfig, caller identity.Caller, sourceIP string) (inspection, error) {
	rules, checks := callerChecks(sc.policy(), caller, sourceIP)
	res, err := op.Gate.Peek(ctx, 1, checks...)
	if err == nil && res.Degraded {
		// The Gate's fallback is no answer for an operator.
		err = res.Cause
	}
	if err != nil {
		return inspection{}, fmt.Errorf("peek: %w", err)
	}
	in := inspection{Stage: sc.stage, EnvironmentOnly: sc.envOnly, Tier: caller.Tier, Plan: rules.Plan, UnknownPlan: rules.UnknownPlan, Network: rules.Network.String(), Owner: rules.Owner,
		Identity: caller.Identity, Hash: op.Hash(caller.Identity), Allowed: rules.Network.Verdict != httplimit.NetworkBlocked}
	own := len(rules.Own)
	for i, d := range res.Decisions {
		l := d.Limit
		st := limitState{
			Name:          l.Name,
			Limit:         rateText(l),
			Count:         l.Count,
			WindowSeconds: int64(l.Window / time.Second),
			Algorithm:     algorithmName(l.Algorithm),
			Used:          l.Count - d.Remaining,
			Remaining:     d.Remaining,
			ResetSeconds:  httplimit.ResetSeconds(d),
			Allowed:       d.Allowed,
		}
		if !d.Allowed {
			st.RetryAfterSeconds = httplimit.RetryAfterSeconds(d.RetryAfter)
		}
		// The caller's own limits decide every request, route limits only
		// those of their routes: only its own denial denies it everywhere.
		if i < own && !d.Allowed && !rules.Own[i].Shadow {
			in.Allowed = false
		}
		in.Limits = append(in.Limits, st)
	}
	if in.InFlight, err = peekSlots(ctx, op, sc.policy(), rules, caller.Identity); err != nil {
		return inspection{}, err
	}
	if in.Control, in.Networks, err = callerControls(ctx, op.Limiter, sc.limits.IPv6Prefix, caller.Identity, sourceIP); err != nil {
		return inspection{}, fmt.Errorf("read controls: %w", err)
	}
	return in, nil
}

// rateText is a limit as the configuration writes it: "100000/1d", where
// Limit.String (which Redis keys carry, and so cannot change) says "24h".
func rateText(l ratelimit.Limit) string {
	const day = 24 * time.Hour
	if l.Window >= day && l.Window%day == 0 {
		return strconv.FormatInt(l.Count, 10) + "/" + strconv.FormatInt(int64(l.Window/day), 10) + "d"
	}
	return l.String()
}

func algorithmName(a ratelimit.Algorithm) string {
	if a == "" {
		return string(ratelimit.SlidingWindow)
	}
	return string(a)
}

// session is one caller command after its flags are parsed: the stage's
// configuration, the caller, a connection to Redis and the caller's limits
// as they stand.
type session struct {
	cmd    *callerCommand
	stage  *stageConfig
	caller identity.Caller
	op     *operator.Conn
	now    inspection
}

// openSession parses a caller command's flags, connects and peeks at the
// caller's limits. The caller closes the session.
func openSession(ctx context.Context, name string, args []string, e env, withJSON, withYes bool) (*session, error) {
	c, err := parseCallerCommand(name, args, e, withJSON, withYes)
	if err != nil {
		return nil, err
	}
	sc, caller, op, err := c.connect(ctx, e)
	if err != nil {
		return nil, err
	}
	if caller.Tier == "" {
		op.Close()
		fmt.Fprintf(e.stderr, "slidegate %s: --identity %s: a hash does not say the caller's tier, which its limits depend on: add --tier as its log line's \"tier\" says (and --plan as its \"plan\", if any)\n", name, caller.Identity)
		return nil, errUsage
	}
	now, err := peekCaller(ctx, op, sc, caller, c.caller.sourceIP(caller))
	if err != nil {
		op.Close()
		return nil, err
	}
	return &session{cmd: c, stage: sc, caller: caller, op: op, now: now}, nil
}

func runInspect(ctx context.Context, args []string, e env) error {
	s, err := openSession(ctx, "inspect", args, e, true, false)
	if err != nil {
		return err
	}
	defer s.op.Close()
	if s.cmd.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s.now)
	}
	printInspection(e.stdout, s.now)
	return nil
}

func printInspection(w io.Writer, in inspection) {
	who := in.Tier
	if in.Plan != "" {
		who += ", plan " + in.Plan
	}
	if in.UnknownPlan != "" {
		who += ", plan " + in.UnknownPlan + " not configured: the tier's limits"
	}
	// One name for the caller everywhere an operator looks: the hash the
	// logs print, which --identity takes back.
	where := "on stage " + in.Stage
	if in.EnvironmentOnly {
		where = "on the environment only (no stage files read)"
	}
	if strings.HasPrefix(in.Identity, identity.KindHash) {
		fmt.Fprintf(w, "caller %s (%s) %s\n", in.Hash, who, where)
	} else {
		fmt.Fprintf(w, "caller %s (%s) %s, identity in logs %s\n", in.Identity, who, where, in.Hash)
	}
	switch in.Network {
	case network.Blocked:
		fmt.Fprintln(w, "network: blocked (RATE_LIMIT_NETWORKS): every request is refused without a Redis call")
	case network.Unlimited:
		fmt.Fprintln(w, "network: unlimited (RATE_LIMIT_NETWORKS): every request is admitted without a Redis call")
	case "":
	default:
		fmt.Fprintf(w, "network: plan %s (RATE_LIMIT_NETWORKS)\n", in.Network)
	}
	if c := in.Control; c != nil {
		if c.Kind == "malformed" {
			fmt.Fprintln(w, "control: a malformed record, ignored by decisions (slidegate lift removes it)")
		} else {
			what := c.Kind
			if c.Kind == "scale" {
				what += " x" + strconv.FormatFloat(c.Factor, 'f', -1, 64)
			}
			fmt.Fprintf(w, "control: %s until %s, set by %s at %s: %s\n", what, stamp(c.Until), orDash(c.SetBy), stamp(c.SetAt), c.Reason)
		}
	}
	for _, n := range in.Networks {
		fmt.Fprintf(w, "network control: %s of %s until %s, set by %s: %s\n", n.Kind, n.Network, stamp(n.Until), orDash(n.SetBy), n.Reason)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LIMIT\tRATE\tALGORITHM\tUSED\tREMAINING\tRESET\tRETRY-AFTER")
	for _, l := range in.Limits {
		retry := "-"
		if !l.Allowed {
			retry = strconv.FormatInt(l.RetryAfterSeconds, 10) + "s"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%ds\t%s\n", l.Name, l.Limit, l.Algorithm, l.Used, l.Remaining, l.ResetSeconds, retry)
	}
	tw.Flush()
	if len(in.InFlight) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IN-FLIGHT LIMIT\tMAX\tHELD\tFIRST LEASE ENDS\tLAST LEASE ENDS")
	for _, sl := range in.InFlight {
		first, last := "-", "-"
		if sl.Held > 0 {
			first, last = strconv.FormatInt(sl.EarliestLeaseEndSeconds, 10)+"s", strconv.FormatInt(sl.LatestLeaseEndSeconds, 10)+"s"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", sl.Name, sl.Max, sl.Held, first, last)
	}
	tw.Flush()
}

func runReset(ctx context.Context, args []string, e env) error {
	s, err := openSession(ctx, "reset", args, e, false, true)
	if err != nil {
		return err
	}
	defer s.op.Close()
	c, sc, caller, op, before := s.cmd, s.stage, s.caller, s.op, s.now
	if !c.yes && !confirmed(e, fmt.Sprintf("Clear the counters of %s (%s) on stage %s (%d limits)?", caller.Identity, caller.Tier, sc.stage, len(before.Limits))) {
		return fmt.Errorf("not confirmed; nothing cleared (--yes skips the question)")
	}
	_, checks := callerChecks(sc.policy(), caller, c.caller.sourceIP(caller))
	n, err := op.Limiter.Reset(ctx, checks...)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "cleared %s (%s) on stage %s: %d of %d limits had counters\n", caller.Identity, caller.Tier, sc.stage, n, len(before.Limits))
	for _, l := range before.Limits {
		fmt.Fprintf(e.stdout, "  %s %s %s: %d used before\n", l.Name, l.Limit, l.Algorithm, l.Used)
	}
	// The functions' Gate holds a cached denial at most controls.Propagation
	// (their Limiter reads live controls), then asks Redis again.
	fmt.Fprintf(e.stdout, "Warm function instances admit the caller again within %s: one that denied it may repeat that denial from its memory until then, whatever Retry-After it gave.\n", controls.Propagation)
	return nil
}

// confirmed asks question on stderr and reads the answer from stdin: only
// y or yes confirms; no answer (end of input) does not.
func confirmed(e env, question string) bool {
	fmt.Fprintf(e.stderr, "%s [y/N] ", question)
	answer, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil {
		fmt.Fprintln(e.stderr) // no answer: end the question's line
	}
	a := strings.ToLower(strings.TrimSpace(answer))
	return a == "y" || a == "yes"
}
