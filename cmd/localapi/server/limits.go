package server

import (
	"strings"

	"github.com/slidegate/slidegate/cmd/localapi/gateway"
	"github.com/slidegate/slidegate/internal/config"
)

// stageLimitVariables pairs each limit's stage variable with the
// environment variable of the same limit. On API Gateway the stage
// variable wins over the function's environment; in `make local` an
// environment variable given on the command line wins over the stage
// variable from samconfig.toml, so that `RATE_LIMIT_ANONYMOUS=3/5s make
// local` does what it says.
var stageLimitVariables = []struct{ stageVar, envVar string }{
	{config.StageVarAnonymous, "RATE_LIMIT_ANONYMOUS"},
	{config.StageVarUser, "RATE_LIMIT_USER"},
	{config.StageVarOrg, "RATE_LIMIT_ORG"},
	{config.StageVarQuota, "RATE_LIMIT_QUOTA"},
	{config.StageVarAlgorithm, "RATE_LIMIT_ALGORITHM"},
}

// LimitSetting is one limit a local server serves and where its value
// came from, for the startup lines.
type LimitSetting struct {
	// StageVariable is the limit's stage variable, e.g. "rateLimitAnonymous".
	StageVariable string
	// Value is what the stage serves, e.g. "30/1m".
	Value string
	// Source says where Value came from: "environment RATE_LIMIT_ANONYMOUS",
	// "samconfig.toml [dev] RateLimitAnonymous" or "template.yaml default
	// RateLimitAnonymous".
	Source string
}

// applyEnvironmentLimits sets, on both stages of spec, the stage variable of
// every limit whose environment variable getenv has, and reports every
// limit with its source. overrides are the samconfig.toml parameter
// overrides of the stage (nil without one).
func applyEnvironmentLimits(spec *gateway.Spec, getenv func(string) string, overrides map[string]string, samconfigPath string) []LimitSetting {
	settings := make([]LimitSetting, 0, len(stageLimitVariables))
	for _, v := range stageLimitVariables {
		param := strings.ToUpper(v.stageVar[:1]) + v.stageVar[1:]
		s := LimitSetting{StageVariable: v.stageVar, Value: spec.StageVariables[v.stageVar]}
		switch env := strings.TrimSpace(getenv(v.envVar)); {
		case env != "":
			s.Value, s.Source = env, "environment "+v.envVar
			spec.StageVariables[v.stageVar] = env
			spec.HTTPStageVariables[v.stageVar] = env
		case overrides[param] != "":
			s.Source = samconfigPath + " [" + spec.Stage + "] " + param
		default:
			s.Source = "template default " + param
		}
		settings = append(settings, s)
	}
	return settings
}
