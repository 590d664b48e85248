package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/slidegate/slidegate/internal/operator"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// controlCommand is block, exempt, scale, lift or controls after its flags
// are parsed.
type controlCommand struct {
	callerCommand
	action   string
	network  string
	duration string
	factor   string
	reason   string
	by       string
	function string
	// sc is the stage read, once.
	sc *stageConfig
}

// parseControlCommand parses a control command's flags; scale's factor
// (x10, x0.1) may come before, between or after them.
func parseControlCommand(action string, args []string, e env) (*controlCommand, error) {
	fs := flag.NewFlagSet("slidegate "+action, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	c := &controlCommand{action: action}
	c.stage.register(fs, e.getenv)
	fs.DurationVar(&c.timeout, "timeout", operator.DefaultTimeout, "bound on connecting to Redis and on each command")
	fs.BoolVar(&c.json, "json", false, "print JSON, for scripts")
	fs.StringVar(&c.function, "function", "", "the operator function's `name` or ARN: change controls through it (lambda:InvokeFunction, recorded by CloudTrail) instead of connecting to Redis")
	if action != "controls" {
		c.caller.register(fs)
		fs.BoolVar(&c.yes, "yes", false, "do not ask for confirmation")
	}
	if action == "block" || action == "exempt" || action == "lift" {
		fs.StringVar(&c.network, "network", "", "a network's `CIDR` (no host bits set), instead of a caller")
	}
	if action == "block" || action == "exempt" || action == "scale" {
		fs.StringVar(&c.duration, "for", "", "how long the control lasts: a `duration` (90m, 1h) or days (7d), at most 30d (required)")
		fs.StringVar(&c.reason, "reason", "", "why, for whoever lists controls later (`text`, required)")
	}
	if action != "controls" {
		fs.StringVar(&c.by, "by", "", "who sets or lifts it (`name`); the OS user by default, or with --function the AWS caller's ARN (self-asserted: CloudTrail holds the authoritative record)")
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		if action != "scale" || c.factor != "" {
			fmt.Fprintf(e.stderr, "slidegate %s: unexpected argument %q\n", action, truncate.Text(fs.Arg(0), truncate.QuotedLen))
			fs.Usage()
			return nil, errUsage
		}
		c.factor, args = fs.Arg(0), fs.Args()[1:]
	}
	if action == "scale" && c.factor == "" {
		fmt.Fprintln(e.stderr, "slidegate scale: give the factor, as x10 or x0.1")
		return nil, errUsage
	}
	return c, nil
}

// parseFactor reads scale's x10 or x0.1 (the x may be left out).
func parseFactor(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimPrefix(strings.ToLower(s), "x"), 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("factor %q: want x10, x0.5 or the like", truncate.Text(s, truncate.QuotedLen))
	}
	return f, nil
}

// request is the control request of the command, resolved: the caller as
// the functions count it (as inspect resolves it), or the network.
func (c *controlCommand) request(e env) (operator.ControlRequest, string, error) {
	req := operator.ControlRequest{Action: c.action, Duration: c.duration, Reason: c.reason}
	if c.action == "scale" {
		f, err := parseFactor(c.factor)
		if err != nil {
			fmt.Fprintln(e.stderr, "slidegate scale:", err)
			return req, "", errUsage
		}
		req.Factor = f
	}
	if c.network != "" {
		if c.caller != (callerFlags{}) {
			fmt.Fprintf(e.stderr, "slidegate %s: give a caller or --network, not both\n", c.action)
			return req, "", errUsage
		}
		if c.action == "scale" {
			fmt.Fprintln(e.stderr, "slidegate scale: a network takes block or exempt, not scale")
			return req, "", errUsage
		}
		p, err := operator.ParseControlNetwork(c.network)
		if err != nil {
			fmt.Fprintf(e.stderr, "slidegate %s: --network: %v\n", c.action, err)
			return req, "", errUsage
		}
		req.Network = p.String()
		c.sc, err = readStage(c.stage, e)
		return req, "network " + req.Network, err
	}
	sc, caller, err := c.resolve(e)
	if err != nil {
		return req, "", err
	}
	c.sc = sc
	req.Identity = caller.Identity
	return req, fmt.Sprintf("%s (%s)", caller.Identity, caller.Tier), nil
}

func runControl(ctx context.Context, action string, args []string, e env) error {
	c, err := parseControlCommand(action, args, e)
	if err != nil {
		return err
	}
	var req operator.ControlRequest
	var target string
	if action == "controls" {
		req = operator.ControlRequest{Action: "list"}
		if c.sc, err = readStage(c.stage, e); err != nil {
			return err
		}
	} else if req, target, err = c.request(e); err != nil {
		return err
	}
	if action != "controls" && action != "lift" {
		if c.duration == "" || strings.TrimSpace(c.reason) == "" {
			fmt.Fprintf(e.stderr, "slidegate %s: --for and --reason are required\n", action)
			return errUsage
		}
		if _, err := operator.ParseControlDuration(c.duration); err != nil {
			fmt.Fprintf(e.stderr, "slidegate %s: --for: %v\n", action, err)
			return errUsage
		}
	}
	if action != "controls" && !c.yes && !confirmed(e, controlQuestion(c, req, target)) {
		return fmt.Errorf("not confirmed; nothing changed (--yes skips the question)")
	}
	if req.Action != "list" {
		if req.By, err = c.setBy(ctx); err != nil {
			return err
		}
	}
	reply, err := c.apply(ctx, req, e)
	if err != nil {
		return err
	}
	if c.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reply)
	}
	printControlReply(e.stdout, reply, target)
	return nil
}

// controlQuestion is the confirmation a change asks, as reset asks its own.
func controlQuestion(c *controlCommand, req operator.ControlRequest, target string) string {
	where := "on stage " + c.stage.stage
	if c.function != "" {
		where = "through " + c.function
	}
	switch req.Action {
	case "lift":
		return fmt.Sprintf("Lift the control of %s %s?", target, where)
	case "scale":
		return fmt.Sprintf("Scale every limit of %s by x%g %s for %s?", target, req.Factor, where, req.Duration)
	case "exempt":
		return fmt.Sprintf("Exempt %s from every limit %s for %s?", target, where, req.Duration)
	}
	return fmt.Sprintf("Block %s %s for %s?", target, where, req.Duration)
}

// setBy is who the control is recorded as set by: --by, else with
// --function the AWS caller's ARN, else the OS user.
func (c *controlCommand) setBy(ctx context.Context) (string, error) {
	if c.by != "" {
		return c.by, nil
	}
	if c.function != "" {
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return "", fmt.Errorf("load AWS configuration: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
		if err != nil {
			return "", fmt.Errorf("who is calling (sts:GetCallerIdentity, for the control's set-by; --by names it instead): %w", err)
		}
		return aws.ToString(out.Arn), nil
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username, nil
	}
	return os.Getenv("USER"), nil
}

// apply carries out req through the operator function or on the stage's
// Redis.
func (c *controlCommand) apply(ctx context.Context, req operator.ControlRequest, e env) (operator.ControlReply, error) {
	if c.function != "" {
		return invokeOperator(ctx, c.function, req, c.timeout)
	}
	op, err := connectStage(ctx, c.sc, c.timeout, e)
	if err != nil {
		return operator.ControlReply{}, err
	}
	defer op.Close()
	return operator.ApplyControl(ctx, op.Limiter, c.sc.limits.IPv6Prefix, req)
}

// invokeOperator sends req to the operator function (Lambda Invoke, with
// the default AWS configuration: AWS_ENDPOINT_URL reaches a local
// emulator) and returns its reply, or its error as an error.
func invokeOperator(ctx context.Context, function string, req operator.ControlRequest, timeout time.Duration) (operator.ControlReply, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return operator.ControlReply{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	payload, err := json.Marshal(req)
	if err != nil {
		return operator.ControlReply{}, fmt.Errorf("encode the request: %w", err)
	}
	// A cold start in the VPC takes seconds: the bound is the function's,
	// not one Redis command's.
	ctx, cancel := context.WithTimeout(ctx, max(timeout, 30*time.Second))
	defer cancel()
	// One attempt: a retried lift whose first attempt succeeded would
	// answer that there was nothing to lift.
	client := lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.RetryMaxAttempts = 1 })
	out, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(function), Payload: payload})
	if err != nil {
		return operator.ControlReply{}, fmt.Errorf("invoke %s: %w", function, err)
	}
	// A function's error is flagged by X-Amz-Function-Error, which the
	// emulator does not send: its payload's shape says it too.
	var fe struct {
		ErrorMessage *string `json:"errorMessage"`
		ErrorType    string  `json:"errorType"`
	}
	if json.Unmarshal(out.Payload, &fe) == nil && fe.ErrorMessage != nil || out.FunctionError != nil {
		msg := truncate.Text(string(out.Payload), 300)
		if fe.ErrorMessage != nil {
			msg = truncate.Text(*fe.ErrorMessage, 300)
		}
		return operator.ControlReply{}, fmt.Errorf("%s refused the request: %s", function, msg)
	}
	var reply operator.ControlReply
	if err := json.Unmarshal(out.Payload, &reply); err != nil {
		return operator.ControlReply{}, fmt.Errorf("%s answered %q: %w", function, truncate.Text(string(out.Payload), 200), err)
	}
	if reply.Action != req.Action || (reply.Control == nil && req.Action != "list" && req.Action != "lift") {
		return operator.ControlReply{}, fmt.Errorf("%s answered %q, not a reply to %s", function, truncate.Text(string(out.Payload), 200), req.Action)
	}
	return reply, nil
}

func printControlReply(w io.Writer, r operator.ControlReply, target string) {
	switch r.Action {
	case "list":
		printControls(w, r)
	case "lift":
		if !r.Found || r.Control == nil {
			fmt.Fprintf(w, "%s had no control in force; nothing lifted\n", target)
			return
		}
		fmt.Fprintf(w, "lifted the %s of %s (set by %s at %s, to end %s: %s)\n", r.Control.Kind, target,
			orDash(r.Control.SetBy), stamp(r.Control.SetAt), stamp(r.Control.Until), r.Control.Reason)
		if r.Control.Network != "" {
			fmt.Fprintf(w, "Every warm instance stops applying it within %s (it reads network controls at most that often).\n", controls.Propagation)
		} else {
			fmt.Fprintf(w, "Decisions stop applying it from the caller's next request; a denial a warm instance cached ends within %s.\n", controls.Propagation)
		}
	default:
		v := r.Control
		what := map[string]string{"block": "blocked", "exempt": "exempted", "scale": "scaled"}[v.Kind]
		if v.Kind == "scale" {
			what += " x" + strconv.FormatFloat(v.Factor, 'f', -1, 64)
		}
		fmt.Fprintf(w, "%s %s until %s, set by %s: %s\n", what, target, stamp(v.Until), orDash(v.SetBy), v.Reason)
		if v.Network != "" {
			fmt.Fprintf(w, "Every warm instance applies it within %s (it reads network controls at most that often).\n", controls.Propagation)
		} else {
			fmt.Fprintf(w, "Every warm instance applies it within %s (it reads which callers hold a control at most that often), a cold one from its first request; a denial a warm instance cached ends within %s.\n", controls.Propagation, controls.Propagation)
		}
	}
}

func printControls(w io.Writer, r operator.ControlReply) {
	if r.Warning != "" {
		fmt.Fprintln(w, "warning:", r.Warning)
	}
	if len(r.Controls) == 0 && len(r.Networks) == 0 {
		fmt.Fprintln(w, "no controls in force")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tTARGET\tFACTOR\tSET BY\tSET AT\tENDS\tREASON")
	for _, v := range append(append([]operator.ControlView{}, r.Networks...), r.Controls...) {
		target := v.Network
		if target == "" {
			target = v.Hash
		}
		factor := "-"
		if v.Kind == "scale" {
			factor = "x" + strconv.FormatFloat(v.Factor, 'f', -1, 64)
		}
		if v.Kind == "malformed" {
			fmt.Fprintf(tw, "malformed\t%s\t-\t-\t-\t-\tignored by decisions; lift removes it\n", target)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Kind, target, factor, orDash(v.SetBy), stamp(v.SetAt), stamp(v.Until), v.Reason)
	}
	tw.Flush()
	fmt.Fprintln(w, "Identities are listed as the logs print them: --identity <hash> inspects, lifts or changes one.")
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// callerControls reads the caller's control, and the network controls
// covering an --ip, for inspect.
func callerControls(ctx context.Context, l *ratelimit.Limiter, ipv6Prefix int, id, sourceIP string) (*operator.ControlView, []operator.ControlView, error) {
	reply, err := operator.ApplyControl(ctx, l, ipv6Prefix, operator.ControlRequest{Action: "get", Identity: id})
	if err != nil {
		return nil, nil, err
	}
	if sourceIP == "" {
		return reply.Control, nil, nil
	}
	addr, err := netip.ParseAddr(strings.TrimSpace(sourceIP))
	if err != nil {
		return reply.Control, nil, nil
	}
	nets, err := l.Controls().Networks(ctx)
	if err != nil && !errors.Is(err, controls.ErrMalformed) && !errors.Is(err, controls.ErrTooMany) {
		return nil, nil, err
	}
	var covering []operator.ControlView
	for _, n := range nets {
		if n.Prefix.Contains(addr.Unmap().WithZone("")) {
			covering = append(covering, operator.ControlView{Kind: n.Control.Kind.String(), Network: n.Prefix.String(),
				SetBy: n.Control.SetBy, SetAt: n.Control.SetAt.UTC(), Until: n.Control.Until.UTC(), Reason: n.Control.Reason})
		}
	}
	return reply.Control, covering, nil
}
