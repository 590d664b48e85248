package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/deployconfig"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/policy"
	"github.com/slidegate/slidegate/internal/truncate"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// report is check's answer.
type report struct {
	Stage    string                 `json:"stage"`
	Settings []deployconfig.Setting `json:"settings"`
	Limits   []limitReport          `json:"limits"`
	Routes   []routeReport          `json:"routes"`
	APIKeys  string                 `json:"apiKeys"`
	// Costs, Shadow and Networks are RATE_LIMIT_COSTS, the stage's shadow
	// list and RATE_LIMIT_NETWORKS as the functions read them.
	Costs    []string `json:"costs"`
	Shadow   []string `json:"shadow"`
	Networks []string `json:"networks"`
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`
}

// limitReport is one limit as the functions resolve it on the stage.
type limitReport struct {
	Name      string `json:"name"`
	Limit     string `json:"limit"`
	Algorithm string `json:"algorithm"`
	Per       string `json:"per"`
	// Failure is what happens when Redis cannot decide: "fails open" (to
	// the local fallback), "fails closed", or for a tier "per route".
	Failure string `json:"failure"`
}

// routeReport is one route of the template with the limits that count it.
type routeReport struct {
	Method     string   `json:"method"`
	Resource   string   `json:"resource"`
	Function   string   `json:"function"`
	Authorizer bool     `json:"authorizer"`
	Limits     []string `json:"limits"`
	FailClosed bool     `json:"failClosed"`
}

func runCheck(args []string, e env) (failed bool, err error) {
	fs := flag.NewFlagSet("slidegate check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var sf stageFlags
	sf.register(fs, e.getenv)
	asJSON := fs.Bool("json", false, "print JSON, for scripts")
	if err := fs.Parse(args); err != nil {
		return false, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "slidegate check: unexpected argument %q\n", fs.Arg(0))
		return false, errUsage
	}
	rep, err := checkStage(sf, e)
	if err != nil {
		return false, err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return false, err
		}
	} else {
		printReport(e.stdout, rep)
	}
	return len(rep.Errors) > 0, nil
}

// checkStage reads a stage as both functions would and reports it.
func checkStage(sf stageFlags, e env) (*report, error) {
	api, err := loadStage(sf, e.getenv, apiFunction, true)
	if err != nil {
		return nil, err
	}
	auth, err := loadStage(sf, e.getenv, authorizerFunction, true)
	if err != nil {
		return nil, err
	}
	rep := &report{Stage: sf.stage, Settings: api.settings, Errors: []string{}, Warnings: []string{}}
	addError := func(format string, a ...any) {
		if msg := fmt.Sprintf(format, a...); !slices.Contains(rep.Errors, msg) {
			rep.Errors = append(rep.Errors, msg)
		}
	}
	warn := func(format string, a ...any) {
		if msg := fmt.Sprintf(format, a...); !slices.Contains(rep.Warnings, msg) {
			rep.Warnings = append(rep.Warnings, msg)
		}
	}

	for _, msg := range api.warnings {
		warn("%s", msg)
	}
	checkOverrides(api.spec, filepath.Base(sf.samconfig), addError)
	checkRequired(api.spec, api.samconfig != "", filepath.Base(sf.samconfig), addError)
	// What the functions would log as a bad value and replace by its
	// default: refused, so an error.
	for _, sc := range []*stageConfig{api, auth} {
		for _, msg := range errorList(sc.cfgErr) {
			addError("%s", msg)
		}
		for _, msg := range errorList(sc.stageErr) {
			addError("%s", msg)
		}
	}
	checkNames(api, sf, e, warn)

	cfg, limits := api.cfg, api.limits
	rep.Limits = limitsOf(cfg, limits)
	rep.Routes = routesOf(api.spec, cfg, limits)
	rep.Costs, rep.Shadow, rep.Networks = []string{}, limits.Shadow.Names(), []string{}
	for _, c := range limits.Costs {
		rep.Costs = append(rep.Costs, c.String())
	}
	if n := cfg.Networks.String(); n != "" {
		rep.Networks = strings.Split(n, ",")
	}
	switch {
	case cfg.APIKeyHashes != nil:
		rep.APIKeys = fmt.Sprintf("%d known keys from API_KEY_HASHES", len(cfg.APIKeyHashes))
	default:
		rep.APIKeys = "the API Gateway keys of the usage plans of the request's API and stage, re-read every " + cfg.APIKeysRefresh.String()
	}
	checkAuthRoutes(api.spec, cfg, limits, warn)
	checkFallback(cfg, limits, warn)
	// A stage whose limits change a window or an algorithm of the
	// environment's starts those limits' callers afresh.
	if envLimits, err := config.ResolveStage(cfg, config.StageValues{}); err == nil {
		for _, msg := range config.RestartWarnings(envLimits, limits) {
			warn("%s", msg)
		}
	}
	// What loosens a limit, computed once, as the functions log it at
	// cold start.
	for _, msg := range policy.Warnings(api.policy()) {
		warn("%s", msg)
	}
	return rep, nil
}

// checkOverrides reports the samconfig.toml parameter overrides that
// CloudFormation would refuse: a parameter the template does not declare,
// a value outside the parameter's constraints.
func checkOverrides(spec *deployconfig.Spec, samconfigName string, addError func(string, ...any)) {
	for _, name := range sortedKeys(spec.Overrides) {
		value := spec.Overrides[name]
		where := fmt.Sprintf("%s [%s] %s=%q", samconfigName, spec.Stage, name, truncate.Text(value, truncate.QuotedLen))
		p, ok := spec.Parameters[name]
		if !ok {
			addError("%s: the template has no parameter %s (CloudFormation refuses the deploy)", where, name)
			continue
		}
		if strings.Contains(strings.ToUpper(value), placeholder) {
			addError("%s: a placeholder, to replace with your own value before deploying (CloudFormation refuses the deploy)", where)
		}
		if p.AllowedPattern != "" {
			re, err := regexp.Compile("^(?:" + p.AllowedPattern + ")$")
			if err != nil {
				addError("template parameter %s: AllowedPattern %q does not compile: %v", name, p.AllowedPattern, err)
			} else if !re.MatchString(value) {
				addError("%s: does not match the parameter's AllowedPattern %s (CloudFormation refuses the deploy)", where, p.AllowedPattern)
			}
		}
		if len(p.AllowedValues) > 0 && !slices.Contains(p.AllowedValues, value) {
			addError("%s: not one of the parameter's AllowedValues %s (CloudFormation refuses the deploy)", where, strings.Join(p.AllowedValues, ", "))
		}
		if p.Type == "Number" {
			n, err := strconv.ParseFloat(value, 64)
			switch {
			case err != nil:
				addError("%s: not a number (CloudFormation refuses the deploy)", where)
			case p.MinValue != nil && n < *p.MinValue:
				addError("%s: below the parameter's MinValue %g (CloudFormation refuses the deploy)", where, *p.MinValue)
			case p.MaxValue != nil && n > *p.MaxValue:
				addError("%s: above the parameter's MaxValue %g (CloudFormation refuses the deploy)", where, *p.MaxValue)
			}
		}
	}
}

// placeholder marks a samconfig.toml value left for the user to replace
// (the shipped VpcId and SubnetIds): no AWS resource is named so.
const placeholder = "REPLACE_ME"

// checkRequired reports the template parameters without a default that
// the stage's parameter overrides give no value, and those of an
// AWS-specific type given an empty one: CloudFormation refuses a deploy
// that leaves one empty ("Parameters: [...] must have values").
func checkRequired(spec *deployconfig.Spec, samconfigRead bool, samconfigName string, addError func(string, ...any)) {
	for _, name := range sortedKeys(spec.Parameters) {
		p := spec.Parameters[name]
		value, overridden := spec.Overrides[name]
		// An override becomes the resolved template's default, so an
		// empty one is told by its type: an AWS-specific type (a VPC, a
		// subnet list) must name something.
		awsType := strings.HasPrefix(p.Type, "AWS::") || strings.HasPrefix(p.Type, "List<AWS::")
		if overridden && (strings.TrimSpace(value) != "" || !awsType) || !overridden && p.HasDefault {
			continue
		}
		if !samconfigRead {
			addError("template parameter %s has no default, and no %s was read to give it a value (CloudFormation refuses the deploy)", name, samconfigName)
			continue
		}
		addError("%s [%s]: no value for the template parameter %s, which has no default (CloudFormation refuses the deploy)", samconfigName, spec.Stage, name)
	}
}

// knownEnvironment are the RATE_LIMIT_ variables the functions read
// besides the stage settings'.
var knownEnvironment = []string{"RATE_LIMIT_KEY_PREFIX", "RATE_LIMIT_HASH_KEY", "RATE_LIMIT_HASH_KEY_SECRET_ARN"}

// checkNames warns of stage variables and RATE_LIMIT_ variables the
// functions do not read: a misspelt name overrides nothing.
func checkNames(sc *stageConfig, sf stageFlags, e env, warn func(string, ...any)) {
	known := deployconfig.StageVariableNames()
	check := func(where string, vars map[string]string) {
		for _, name := range sortedKeys(vars) {
			if !slices.Contains(known, name) && !strings.HasPrefix(name, config.StageVarPlanPrefix) {
				warn("stage variable %s (%s) overrides nothing: the functions read only %s", name, where, strings.Join(known, ", "))
			}
		}
	}
	check("REST API", sc.spec.StageVariables)
	check("HTTP API", sc.spec.HTTPStageVariables)
	check("--stage-var", sf.stageVars)
	envKnown := slices.Clone(knownEnvironment)
	for _, s := range sc.settings {
		envKnown = append(envKnown, s.EnvVar)
	}
	names := map[string]string{}
	for _, kv := range e.environ() {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = ""
	}
	for name := range sc.spec.Environment {
		names[name] = ""
	}
	for _, name := range sortedKeys(names) {
		if strings.HasPrefix(name, "RATE_LIMIT_") && !slices.Contains(envKnown, name) {
			warn("environment variable %s overrides nothing: the functions do not read it", name)
		}
	}
}

// limitsOf lists the stage's limits.
func limitsOf(cfg *config.Config, limits *config.Limits) []limitReport {
	tiers := limits.Tiers
	v6 := fmt.Sprintf("per source IP (IPv6 per /%d)", limits.IPv6Prefix)
	out := []limitReport{
		{Name: identity.TierAnonymous, Limit: tiers.Anonymous.String(), Algorithm: listAlgorithms(tiers.Anonymous), Per: v6, Failure: "per route"},
		{Name: identity.TierUser, Limit: tiers.User.String(), Algorithm: listAlgorithms(tiers.User), Per: "per verified JWT subject", Failure: "per route"},
		{Name: identity.TierOrg, Limit: tiers.Org.String(), Algorithm: listAlgorithms(tiers.Org), Per: "per API key", Failure: "per route"},
		{Name: config.QuotaLimitName, Limit: limits.Quota.String(), Algorithm: algorithmName(limits.Quota.Algorithm), Per: "per caller, each GET /v1/quota", Failure: "fails open"},
	}
	for _, name := range limits.Plans.Names() {
		p := limits.Plans[name]
		out = append(out, limitReport{
			Name: name, Limit: p.String(), Algorithm: listAlgorithms(p),
			Per: "plan: per caller on it, instead of its tier", Failure: "per route",
		})
	}
	for _, r := range limits.Routes {
		failure := "fails open"
		if (policy.Stage{Limits: limits}).IsFailClosed(samplePath(r.Path.Text)) {
			failure = "fails closed"
		}
		out = append(out, limitReport{
			Name: r.Name(), Limit: r.Limits.String(), Algorithm: listAlgorithms(r.Limits),
			Per: "per caller, each matching request", Failure: failure,
		})
	}
	return out
}

// listAlgorithms names the algorithms of a limit list, each once, in
// order.
func listAlgorithms(list config.LimitList) string {
	var names []string
	for _, l := range list {
		if a := algorithmName(l.Algorithm); !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	return strings.Join(names, ",")
}

// routesOf lists the template's routes with the limits that count them.
func routesOf(spec *deployconfig.Spec, cfg *config.Config, limits *config.Limits) []routeReport {
	var out []routeReport
	for _, r := range spec.Routes {
		path := samplePath(r.Resource)
		rr := routeReport{Method: r.Method, Resource: r.Resource, Function: r.Function, Authorizer: r.Authorized && spec.HasAuthorizer,
			FailClosed: (policy.Stage{Limits: limits}).IsFailClosed(path), Limits: []string{}}
		if rr.Authorizer {
			rr.Limits = append(rr.Limits, "tier")
		}
		for _, l := range (policy.Stage{Limits: limits}).RouteLimits(r.Method, path) {
			rr.Limits = append(rr.Limits, l.Name())
		}
		out = append(out, rr)
	}
	return out
}

// authWords mark a path segment of an authentication route.
var authWords = []string{"auth", "login", "logon", "signin", "sign-in", "password"}

func isAuthPath(path string) bool {
	for _, seg := range strings.Split(strings.ToLower(path), "/") {
		for _, w := range authWords {
			if strings.Contains(seg, w) {
				return true
			}
		}
	}
	return false
}

// checkAuthRoutes warns of authentication routes (a path segment naming
// auth, login, sign-in or a password) that fail open, or whose own limit
// is approximate: during an outage, or at a window edge, they admit more
// password guesses than their limit says.
func checkAuthRoutes(spec *deployconfig.Spec, cfg *config.Config, limits *config.Limits, warn func(string, ...any)) {
	for _, r := range spec.Routes {
		path := samplePath(r.Resource)
		if !isAuthPath(r.Resource) {
			continue
		}
		if !(policy.Stage{Limits: limits}).IsFailClosed(path) {
			warn("login route %s %s fails open: when Redis is down it is limited per instance only (add it to RATE_LIMIT_FAIL_CLOSED)", r.Method, r.Resource)
		}
		if len((policy.Stage{Limits: limits}).RouteLimits(r.Method, path)) == 0 {
			warn("login route %s %s has no route limit of its own (RATE_LIMIT_ROUTES): only the caller's tier limit counts it", r.Method, r.Resource)
		}
	}
	for _, l := range limits.Routes {
		if !isAuthPath(l.Path.Text) {
			continue
		}
		if !(policy.Stage{Limits: limits}).IsFailClosed(samplePath(l.Path.Text)) {
			warn("login route limit %q fails open: when Redis is down it is limited per instance only (add its glob to RATE_LIMIT_FAIL_CLOSED)", l.Name())
		}
		for _, x := range l.Limits {
			if alg := algorithmName(x.Algorithm); alg != string(ratelimit.SlidingLog) {
				warn("login route limit %q is %s, an approximate algorithm: some rolling window admits more than %s; sliding-log is exact (%s=%s:sliding-log)", x.Name, alg, x.Limit, l.Name(), x.Limit)
			}
		}
	}
}

// checkFallback warns of fail-open limits whose fallback share, over every
// instance, admits more than the limit: each instance admits the limit
// divided by RATE_LIMIT_FALLBACK_INSTANCES, rounded up, at least one.
func checkFallback(cfg *config.Config, limits *config.Limits, warn func(string, ...any)) {
	n := cfg.FallbackInstances
	failOpen := []ratelimit.Limit{limits.Quota.Limit}
	for _, list := range []config.LimitList{limits.Tiers.Anonymous, limits.Tiers.User, limits.Tiers.Org} {
		failOpen = append(failOpen, list.Limits()...)
	}
	for _, name := range limits.Plans.Names() {
		failOpen = append(failOpen, limits.Plans[name].Limits()...)
	}
	for _, r := range limits.Routes {
		if !(policy.Stage{Limits: limits}).IsFailClosed(samplePath(r.Path.Text)) {
			failOpen = append(failOpen, r.Limits.Limits()...)
		}
	}
	for _, l := range failOpen {
		share := max((l.Count+n-1)/n, 1)
		if share*n > l.Count {
			warn("fallback share of %q (%s) is larger than the limit: during an outage each of %d instances (RATE_LIMIT_FALLBACK_INSTANCES) admits %d, %d in all", l.Name, l, n, share, share*n)
		}
	}
}

// samplePath is a path a glob or a template resource matches: a wildcard
// segment or a path parameter stands for "x".
func samplePath(pattern string) string {
	var segs []string
	for _, seg := range strings.Split(pattern, "/") {
		switch {
		case seg == "" || seg == "**":
		case seg == "*" || strings.HasPrefix(seg, "{"):
			segs = append(segs, "x")
		default:
			segs = append(segs, seg)
		}
	}
	return "/" + strings.Join(segs, "/")
}

func printReport(w io.Writer, rep *report) {
	fmt.Fprintf(w, "stage %s\n\nsettings\n", rep.Stage)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range rep.Settings {
		v := s.Value
		if v == "" {
			v = "(default)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, v, s.Source)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nlimits, as the functions resolve them")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range rep.Limits {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", l.Name, l.Limit, l.Algorithm, l.Per, l.Failure)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nroutes")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rep.Routes {
		limits := strings.Join(r.Limits, ", ")
		if !r.Authorizer {
			limits = "no authorizer"
			if len(r.Limits) > 0 {
				limits += "; " + strings.Join(r.Limits, ", ")
			}
		}
		failure := "fails open"
		if r.FailClosed {
			failure = "fails closed"
		}
		fmt.Fprintf(tw, "  %s %s\t%s\t%s\t%s\n", r.Method, r.Resource, r.Function, limits, failure)
	}
	tw.Flush()
	for _, l := range []struct {
		name   string
		values []string
	}{{"costs", rep.Costs}, {"shadow (evaluated, not enforced)", rep.Shadow}, {"networks", rep.Networks}} {
		if len(l.values) > 0 {
			fmt.Fprintf(w, "\n%s: %s\n", l.name, strings.Join(l.values, ", "))
		}
	}
	fmt.Fprintf(w, "\napi keys: %s\n\n", rep.APIKeys)
	for _, msg := range rep.Warnings {
		fmt.Fprintln(w, "warning:", msg)
	}
	for _, msg := range rep.Errors {
		fmt.Fprintln(w, "error:", msg)
	}
	fmt.Fprintf(w, "%d errors, %d warnings\n", len(rep.Errors), len(rep.Warnings))
}
