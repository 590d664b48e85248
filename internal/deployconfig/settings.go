package deployconfig

import "strings"

// Setting is one limit or setting a stage serves and where its value comes
// from.
type Setting struct {
	// Name is the stage variable the functions read the value from, e.g.
	// "rateLimitAnonymous", or, for a setting that has none, the
	// environment variable, e.g. "RATE_LIMIT_ROUTES".
	Name string
	// EnvVar is the functions' environment variable of the setting, e.g.
	// "RATE_LIMIT_ANONYMOUS".
	EnvVar string
	// Value is what the stage serves, e.g. "30/1m"; empty when neither the
	// environment nor the template sets it (the functions' default
	// applies).
	Value string
	// Source says where Value came from: "environment RATE_LIMIT_ANONYMOUS",
	// "samconfig.toml [dev] RateLimitAnonymous", "template default
	// RateLimitAnonymous" or "function default".
	Source string
}

// stageSettings are the limits and settings a stage serves: the stage
// variables (which the functions read per request, over their
// environment) and the environment variables without one, each with the
// template parameter that sets it.
var stageSettings = []struct{ stageVar, envVar, param string }{
	{"rateLimitAnonymous", "RATE_LIMIT_ANONYMOUS", "RateLimitAnonymous"},
	{"rateLimitUser", "RATE_LIMIT_USER", "RateLimitUser"},
	{"rateLimitOrg", "RATE_LIMIT_ORG", "RateLimitOrg"},
	{"rateLimitQuota", "RATE_LIMIT_QUOTA", "RateLimitQuota"},
	{"rateLimitAlgorithm", "RATE_LIMIT_ALGORITHM", "RateLimitAlgorithm"},
	{"rateLimitIpv6Prefix", "RATE_LIMIT_IPV6_PREFIX", "RateLimitIpv6Prefix"},
	{"rateLimitShadow", "RATE_LIMIT_SHADOW", "RateLimitShadow"},
	{"rateLimitConcurrency", "RATE_LIMIT_CONCURRENCY", "RateLimitConcurrency"},
	{"", "RATE_LIMIT_ROUTES", "RateLimitRoutes"},
	{"", "RATE_LIMIT_PLANS", "RateLimitPlans"},
	{"", "RATE_LIMIT_COSTS", "RateLimitCosts"},
	{"", "RATE_LIMIT_NETWORKS", "RateLimitNetworks"},
	{"", "RATE_LIMIT_FAIL_CLOSED", "RateLimitFailClosed"},
	{"", "RATE_LIMIT_FALLBACK_INSTANCES", "RateLimitFallbackInstances"},
	{"", "RATE_LIMIT_CONCURRENCY_LEASE", "RateLimitConcurrencyLease"},
}

// StageVariableNames are the stage variables the functions read.
func StageVariableNames() []string {
	var names []string
	for _, s := range stageSettings {
		if s.stageVar != "" {
			names = append(names, s.stageVar)
		}
	}
	return names
}

// ApplyEnvironment sets, on both APIs' stage variables of spec, every
// stage variable whose environment variable getenv has, so that an
// environment variable given on the command line wins over the stage's
// samconfig.toml value (on API Gateway the stage variable would win over
// the functions' environment; for a local run or an operator's command the
// command line says what it means). It returns every limit and setting of
// the stage with its value and source; samconfigName names the
// samconfig.toml file in the sources.
func ApplyEnvironment(spec *Spec, getenv func(string) string, samconfigName string) []Setting {
	settings := make([]Setting, 0, len(stageSettings))
	for _, v := range stageSettings {
		s := Setting{Name: v.stageVar, EnvVar: v.envVar}
		if v.stageVar == "" {
			s.Name = v.envVar
			s.Value = spec.Environment[v.envVar]
		} else {
			s.Value = spec.StageVariables[v.stageVar]
		}
		_, declared := spec.Parameters[v.param]
		switch env := strings.TrimSpace(getenv(v.envVar)); {
		case env != "":
			s.Value, s.Source = env, "environment "+v.envVar
			if v.stageVar != "" {
				spec.StageVariables[v.stageVar] = env
				spec.HTTPStageVariables[v.stageVar] = env
			}
		case s.Value == "":
			s.Source = "function default"
		case spec.Overrides[v.param] != "":
			s.Source = samconfigName + " [" + spec.Stage + "] " + v.param
		case declared:
			s.Source = "template default " + v.param
		default:
			s.Source = "template"
		}
		settings = append(settings, s)
	}
	return settings
}
