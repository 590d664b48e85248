package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/deployconfig"
	"github.com/slidegate/slidegate/internal/policy"
)

// Logical IDs of the template's functions.
const (
	authorizerFunction = "AuthorizerFunction"
	apiFunction        = "ApiFunction"
)

// stageFlags say which stage's configuration to read.
type stageFlags struct {
	stage, template, samconfig string
	stageVars                  stageVarFlag
	// local reads the stage as make local serves it: its demo keys, JWT
	// settings and hash key where nothing else sets them.
	local bool
}

func (f *stageFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	stage := getenv("STAGE")
	if stage == "" {
		stage = "dev"
	}
	f.stageVars = stageVarFlag{}
	fs.StringVar(&f.stage, "stage", stage, "stage whose samconfig.toml environment gives the stage variables (env STAGE)")
	fs.StringVar(&f.template, "template", "template.yaml", "SAM template; when it does not exist, the environment alone is read")
	fs.StringVar(&f.samconfig, "samconfig", "samconfig.toml", "SAM CLI configuration with the stages' parameter overrides")
	fs.Var(f.stageVars, "stage-var", "a stage variable `name=value`, over the stage's (repeatable)")
	fs.BoolVar(&f.local, "local", false, "read the stage as make local serves it: its demo API keys (local-pro-key on plan pro), JWT secret and identity hash key where nothing else sets them")
}

// stageVarFlag collects --stage-var name=value.
type stageVarFlag map[string]string

func (s stageVarFlag) String() string { return "" }

func (s stageVarFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	s[strings.TrimSpace(name)] = value
	return nil
}

// stageConfig is a stage's configuration as one function reads it.
type stageConfig struct {
	stage string
	// spec is the template stage, nil when no template was read.
	spec *deployconfig.Spec
	// samconfig is the samconfig.toml read, "" for none.
	samconfig string
	// settings are the stage's limits and settings with their sources
	// (none without a template).
	settings []deployconfig.Setting
	// stageVars are the stage variables requests carry.
	stageVars map[string]string
	// getenv is the function's environment: the process environment over
	// the template's.
	getenv func(string) string
	// cfg and cfgErr are config.FromEnv's answer for getenv.
	cfg    *config.Config
	cfgErr error
	// limits and stageErr are the stage's limits over cfg.
	limits   *config.Limits
	stageErr error
	// warnings are what the command must tell about where the
	// configuration came from (a stage samconfig.toml does not name, no
	// stage files at all).
	warnings []string
	// envOnly is true when no template was found: the environment alone
	// was read, none of the stage's settings.
	envOnly bool
}

// loadStage reads the configuration of the function functionID on the
// stage of f. A template that does not exist is not an error unless
// requireTemplate; a template or samconfig.toml that does not parse is.
func loadStage(f stageFlags, getenv func(string) string, functionID string, requireTemplate bool) (*stageConfig, error) {
	sc := &stageConfig{stage: f.stage, stageVars: map[string]string{}, getenv: getenv}
	if _, err := os.Stat(f.template); err != nil && !requireTemplate {
		// Say what was not read, lest the environment's answer pass for
		// the stage's (a plan, a limit its samconfig.toml sets).
		sc.envOnly = true
		sc.warnings = append(sc.warnings, fmt.Sprintf("no stage files: looked for %s and %s; read the environment only, not stage %s's settings (its plans, limits and stage variables): run in the repository or give --template and --samconfig",
			absPath(f.template), absPath(f.samconfig), f.stage))
	} else {
		if err != nil {
			return nil, fmt.Errorf("no template: looked for %s (and %s); check reads a stage from its files: run in the repository or give --template and --samconfig", absPath(f.template), absPath(f.samconfig))
		}
		samconfig := f.samconfig
		if _, err := os.Stat(samconfig); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("read samconfig: %w", err)
			}
			samconfig = ""
			sc.warnings = append(sc.warnings, fmt.Sprintf("no %s: looked for %s; read %s's defaults and the environment, not stage %s's parameter overrides",
				filepath.Base(f.samconfig), absPath(f.samconfig), filepath.Base(f.template), f.stage))
		}
		spec, err := deployconfig.Load(f.template, samconfig, f.stage)
		if err != nil {
			return nil, err
		}
		sc.spec, sc.samconfig = spec, samconfig
		if samconfig != "" {
			known, err := deployconfig.HasEnvironment(samconfig, f.stage)
			if err != nil {
				return nil, err
			}
			if !known {
				// A mistyped --stage would otherwise show the template's
				// defaults as if they were the stage's.
				sc.warnings = append(sc.warnings, fmt.Sprintf("%s has no environment %q: the settings shown are the template's defaults, not a deployed stage's", filepath.Base(samconfig), f.stage))
			}
		}
		sc.settings = deployconfig.ApplyEnvironment(spec, getenv, filepath.Base(f.samconfig))
		maps.Copy(sc.stageVars, spec.StageVariables)
		template := spec.EnvironmentOf(functionID)
		sc.getenv = func(name string) string {
			if v := getenv(name); v != "" {
				return v
			}
			return template[name]
		}
	}
	maps.Copy(sc.stageVars, f.stageVars)
	if f.local {
		var template map[string]string
		if sc.spec != nil {
			template = sc.spec.EnvironmentOf(functionID)
		}
		defaults, read := deployconfig.LocalDefaults(getenv, template), sc.getenv
		sc.getenv = func(name string) string {
			if v := read(name); v != "" {
				return v
			}
			return defaults[name]
		}
	}
	sc.cfg, sc.cfgErr = config.FromEnv(sc.getenv)
	sc.limits, sc.stageErr = config.ResolveStage(sc.cfg, config.StageValuesOf(sc.stageVars))
	return sc, nil
}

// absPath is path made absolute for a message, or path when it cannot be.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// policy is the stage's request policy, as the functions resolve it.
func (sc *stageConfig) policy() policy.Stage { return policy.Stage{Limits: sc.limits} }

// errorList splits a joined error into its parts.
func errorList(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			out = append(out, errorList(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
