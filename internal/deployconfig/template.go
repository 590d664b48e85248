// Package deployconfig reads slidegate's SAM app as one stage deploys it:
// template.yaml (parameters, routes, the stage's variables, the functions'
// environment, the authorizer's identity sources, gateway responses) with
// the parameter overrides of that stage's samconfig.toml environment. The
// local API Gateway of `make local` (cmd/localapi) serves what it reads, and
// the slidegate command (cmd/slidegate) checks and inspects the limits it
// configures.
package deployconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// Route is one API event of a function in template.yaml.
type Route struct {
	// Method is the HTTP method, upper case, or "ANY".
	Method string
	// Resource is the resource path, e.g. "/v1/items" or "/items/{id}".
	Resource string
	// Function is the logical ID of the function the route invokes.
	Function string
	// Authorized is false for a route with "Auth: Authorizer: NONE".
	Authorized bool
}

// GatewayResponse is one entry of the REST API's GatewayResponses.
type GatewayResponse struct {
	// StatusCode is the HTTP status, e.g. 429.
	StatusCode int
	// Headers maps a header name to its mapping expression: a 'quoted'
	// static value or context.authorizer.<key>.
	Headers map[string]string
	// Templates maps a content type to its body template (simple
	// $context / $stageVariables substitution, no VTL).
	Templates map[string]string
}

// Spec is what the local gateway serves: one stage of template.yaml, its
// parameters resolved with the stage's samconfig.toml overrides.
type Spec struct {
	// Stage is the stage name.
	Stage string
	// Routes are the REST API's routes, most specific first.
	Routes []Route
	// StageVariables are the REST API stage's variables.
	StageVariables map[string]string
	// HTTPStageVariables are the HTTP API stage's variables.
	HTTPStageVariables map[string]string
	// HasAuthorizer is true when the REST API has a default authorizer.
	HasAuthorizer bool
	// IdentityHeaders and IdentityQueryStrings are the authorizer's
	// identity sources that a request may lack (a 401 before the
	// authorizer runs when one is missing).
	IdentityHeaders, IdentityQueryStrings []string
	// Responses are the REST API's gateway responses by type.
	Responses map[string]GatewayResponse
	// Environment is the functions' environment from the template's
	// Globals, with every value that only makes sense in AWS (Redis
	// endpoints and secrets) left out.
	Environment map[string]string
	// FunctionEnvironment holds each function's own environment
	// variables (its Properties.Environment), by logical ID, with the same
	// AWS-only values left out. They add to Environment for that function
	// (EnvironmentOf).
	FunctionEnvironment map[string]map[string]string
	// Parameters are the template's parameters by name, as declared (their
	// defaults and constraints, not the stage's values).
	Parameters map[string]Parameter
	// Overrides are the parameter overrides of the stage's samconfig.toml
	// environment, by name (empty without one).
	Overrides map[string]string
}

// Parameter is one entry of the template's Parameters.
type Parameter struct {
	// Type is the CloudFormation type, e.g. "String" or "Number".
	Type string
	// Default is the default value, rendered as a string; HasDefault is
	// false when the parameter has none.
	Default    string
	HasDefault bool
	// AllowedPattern is the regular expression a String value must match
	// in full, when set.
	AllowedPattern string
	// AllowedValues are the only values allowed, when set.
	AllowedValues []string
	// MinValue and MaxValue bound a Number, when set.
	MinValue, MaxValue *float64
}

// Value is the value a stage deploys the parameter name with: its
// samconfig.toml override, else its default. ok is false for a parameter
// the template does not declare.
func (s *Spec) Value(name string) (value string, ok bool) {
	p, declared := s.Parameters[name]
	if !declared {
		return "", false
	}
	if v, set := s.Overrides[name]; set {
		return v, true
	}
	return p.Default, true
}

// EnvironmentOf is the template's environment of one function: the
// Globals' variables with the function's own on top, as SAM merges them.
func (s *Spec) EnvironmentOf(functionID string) map[string]string {
	env := make(map[string]string, len(s.Environment)+len(s.FunctionEnvironment[functionID]))
	for k, v := range s.Environment {
		env[k] = v
	}
	for k, v := range s.FunctionEnvironment[functionID] {
		env[k] = v
	}
	return env
}

// awsOnlyVariables are environment variables whose template values name AWS
// resources (a cache endpoint, a secret) that a local run cannot use.
var awsOnlyVariables = map[string]bool{
	"REDIS_URL":             true,
	"REDIS_CLUSTER":         true,
	"REDIS_AUTH_SECRET_ARN": true,
	"JWT_HS256_SECRET_ARN":  true,
	// A local run hashes identities with its own demo key instead.
	"RATE_LIMIT_HASH_KEY_SECRET_ARN": true,
}

// Load reads the SAM template at templatePath for stage: the template's
// parameters take the parameter_overrides of the samconfig.toml
// environment named like the stage (when samconfigPath is set and has
// one), and StageName is the stage.
func Load(templatePath, samconfigPath, stage string) (*Spec, error) {
	raw, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	params := map[string]any{}
	overrides := map[string]string{}
	if samconfigPath != "" {
		if overrides, err = ParameterOverrides(samconfigPath, stage); err != nil {
			return nil, err
		}
		for k, v := range overrides {
			params[k] = v
		}
	}
	params["StageName"] = stage
	resolved, err := intrinsics.ProcessYAML(raw, &intrinsics.ProcessorOptions{
		ParameterOverrides: params,
	})
	if err != nil {
		return nil, fmt.Errorf("resolve template %s: %w", templatePath, err)
	}
	var doc templateDoc
	if err := json.Unmarshal(resolved, &doc); err != nil {
		return nil, fmt.Errorf("decode template %s: %w", templatePath, err)
	}
	spec := &Spec{
		Stage:               stage,
		StageVariables:      map[string]string{},
		HTTPStageVariables:  map[string]string{},
		Responses:           map[string]GatewayResponse{},
		Environment:         map[string]string{},
		FunctionEnvironment: map[string]map[string]string{},
		Parameters:          map[string]Parameter{},
		Overrides:           overrides,
	}
	for name, p := range doc.Parameters {
		param := Parameter{
			Type:           p.Type,
			Default:        Stringify(p.Default),
			HasDefault:     p.Default != nil,
			AllowedPattern: p.AllowedPattern,
			MinValue:       number(p.MinValue),
			MaxValue:       number(p.MaxValue),
		}
		for _, v := range p.AllowedValues {
			param.AllowedValues = append(param.AllowedValues, Stringify(v))
		}
		spec.Parameters[name] = param
	}
	for name, v := range doc.Globals.Function.Environment.Variables {
		if s, ok := v.(string); ok && s != "" && !awsOnlyVariables[name] {
			spec.Environment[name] = s
		}
	}
	for id, raw := range doc.Resources {
		var res resourceDoc
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("template %s: resource %s: %w", templatePath, id, err)
		}
		if err := spec.add(id, res); err != nil {
			return nil, fmt.Errorf("template %s: resource %s: %w", templatePath, id, err)
		}
	}
	if len(spec.Routes) == 0 {
		return nil, fmt.Errorf("template %s: no function has an Api event", templatePath)
	}
	sortRoutes(spec.Routes)
	return spec, nil
}

// templateDoc is the part of a resolved template the gateway reads.
type templateDoc struct {
	Parameters map[string]struct {
		Type           string `json:"Type"`
		Default        any    `json:"Default"`
		AllowedPattern string `json:"AllowedPattern"`
		AllowedValues  []any  `json:"AllowedValues"`
		MinValue       any    `json:"MinValue"`
		MaxValue       any    `json:"MaxValue"`
	} `json:"Parameters"`
	Globals struct {
		Function struct {
			Environment struct {
				Variables map[string]any `json:"Variables"`
			} `json:"Environment"`
		} `json:"Function"`
	} `json:"Globals"`
	Resources map[string]json.RawMessage `json:"Resources"`
}

type resourceDoc struct {
	Type       string          `json:"Type"`
	Properties json.RawMessage `json:"Properties"`
}

type functionProps struct {
	Environment struct {
		Variables map[string]any `json:"Variables"`
	} `json:"Environment"`
	Events map[string]struct {
		Type       string `json:"Type"`
		Properties struct {
			Path   string `json:"Path"`
			Method string `json:"Method"`
			Auth   struct {
				Authorizer string `json:"Authorizer"`
			} `json:"Auth"`
		} `json:"Properties"`
	} `json:"Events"`
}

type restAPIProps struct {
	Variables map[string]any `json:"Variables"`
	Auth      struct {
		DefaultAuthorizer string `json:"DefaultAuthorizer"`
		Authorizers       map[string]struct {
			Identity struct {
				Headers      []string `json:"Headers"`
				QueryStrings []string `json:"QueryStrings"`
			} `json:"Identity"`
		} `json:"Authorizers"`
	} `json:"Auth"`
	GatewayResponses map[string]struct {
		StatusCode         any `json:"StatusCode"`
		ResponseParameters struct {
			Headers map[string]any `json:"Headers"`
		} `json:"ResponseParameters"`
		ResponseTemplates map[string]any `json:"ResponseTemplates"`
	} `json:"GatewayResponses"`
}

type httpStageProps struct {
	StageVariables map[string]any `json:"StageVariables"`
}

func (s *Spec) add(id string, res resourceDoc) error {
	switch res.Type {
	case "AWS::Serverless::Function":
		var p functionProps
		if err := json.Unmarshal(res.Properties, &p); err != nil {
			return fmt.Errorf("decode properties: %w", err)
		}
		for name, v := range p.Environment.Variables {
			if str := Stringify(v); str != "" && !awsOnlyVariables[name] {
				if s.FunctionEnvironment[id] == nil {
					s.FunctionEnvironment[id] = map[string]string{}
				}
				s.FunctionEnvironment[id][name] = str
			}
		}
		for name, ev := range p.Events {
			if ev.Type != "Api" {
				continue
			}
			if !strings.HasPrefix(ev.Properties.Path, "/") || ev.Properties.Method == "" {
				return fmt.Errorf("event %s: want a Path starting with / and a Method", name)
			}
			s.Routes = append(s.Routes, Route{
				Method:     normalizeMethod(ev.Properties.Method),
				Resource:   ev.Properties.Path,
				Function:   id,
				Authorized: !strings.EqualFold(ev.Properties.Auth.Authorizer, "NONE"),
			})
		}
	case "AWS::Serverless::Api":
		var p restAPIProps
		if err := json.Unmarshal(res.Properties, &p); err != nil {
			return fmt.Errorf("decode properties: %w", err)
		}
		for k, v := range p.Variables {
			s.StageVariables[k] = Stringify(v)
		}
		if name := p.Auth.DefaultAuthorizer; name != "" && name != "NONE" {
			a, ok := p.Auth.Authorizers[name]
			if !ok {
				return fmt.Errorf("DefaultAuthorizer %q is not among Authorizers", name)
			}
			s.HasAuthorizer = true
			s.IdentityHeaders = a.Identity.Headers
			s.IdentityQueryStrings = a.Identity.QueryStrings
		}
		for typ, gr := range p.GatewayResponses {
			resp := GatewayResponse{Headers: map[string]string{}, Templates: map[string]string{}}
			if _, err := fmt.Sscan(Stringify(gr.StatusCode), &resp.StatusCode); err != nil || resp.StatusCode < 100 || resp.StatusCode > 599 {
				return fmt.Errorf("gateway response %s: StatusCode %v", typ, gr.StatusCode)
			}
			for h, v := range gr.ResponseParameters.Headers {
				resp.Headers[h] = Stringify(v)
			}
			for ct, v := range gr.ResponseTemplates {
				resp.Templates[ct] = Stringify(v)
			}
			s.Responses[typ] = resp
		}
	case "AWS::ApiGatewayV2::Stage":
		var p httpStageProps
		if err := json.Unmarshal(res.Properties, &p); err != nil {
			return fmt.Errorf("decode properties: %w", err)
		}
		for k, v := range p.StageVariables {
			s.HTTPStageVariables[k] = Stringify(v)
		}
	}
	return nil
}

func normalizeMethod(m string) string {
	m = strings.ToUpper(m)
	if m == "X-AMAZON-APIGATEWAY-ANY-METHOD" {
		return "ANY"
	}
	return m
}

// number reads a MinValue or MaxValue, a JSON number or a string holding
// one; nil when absent or not a number.
func number(v any) *float64 {
	if v == nil {
		return nil
	}
	f, err := strconv.ParseFloat(Stringify(v), 64)
	if err != nil {
		return nil
	}
	return &f
}

// Stringify renders a resolved template value (or any decoded JSON value)
// as API Gateway would store it: strings as they are, numbers and booleans
// in their JSON form, nil as the empty string.
func Stringify(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}

// sortRoutes orders routes so that the first match is API Gateway's: more
// literal segments first, greedy {proxy+} last.
func sortRoutes(routes []Route) {
	sort.SliceStable(routes, func(i, j int) bool {
		a, b := routeRank(routes[i].Resource), routeRank(routes[j].Resource)
		if a != b {
			return a > b
		}
		if routes[i].Resource != routes[j].Resource {
			return routes[i].Resource < routes[j].Resource
		}
		return routes[i].Method < routes[j].Method
	})
}

func routeRank(resource string) int {
	rank := 0
	for _, seg := range strings.Split(strings.Trim(resource, "/"), "/") {
		switch {
		case strings.HasSuffix(seg, "+}"):
			rank -= 1000
		case strings.HasPrefix(seg, "{"):
			rank++
		default:
			rank += 10
		}
	}
	return rank
}

// Match returns the route of method and path, and the path parameters.
// ok is false when no route's resource matches the path, or none of the
// routes of that resource allows the method (API Gateway answers both with
// 403 Missing Authentication Token).
func (s *Spec) Match(method, path string) (Route, map[string]string, bool) {
	method = strings.ToUpper(method)
	for _, r := range s.Routes {
		if r.Method != method && r.Method != "ANY" {
			continue
		}
		if params, ok := matchResource(r.Resource, path); ok {
			return r, params, true
		}
	}
	return Route{}, nil, false
}

func matchResource(resource, path string) (map[string]string, bool) {
	rsegs := strings.Split(strings.Trim(resource, "/"), "/")
	psegs := strings.Split(strings.Trim(path, "/"), "/")
	if resource == "/" {
		rsegs = nil
	}
	if path == "/" || path == "" {
		psegs = nil
	}
	params := map[string]string{}
	for i, rs := range rsegs {
		if strings.HasPrefix(rs, "{") && strings.HasSuffix(rs, "+}") {
			if i >= len(psegs) {
				return nil, false
			}
			params[rs[1:len(rs)-2]] = strings.Join(psegs[i:], "/")
			return params, true
		}
		if i >= len(psegs) {
			return nil, false
		}
		if strings.HasPrefix(rs, "{") && strings.HasSuffix(rs, "}") {
			if psegs[i] == "" {
				return nil, false
			}
			params[rs[1:len(rs)-1]] = psegs[i]
			continue
		}
		if rs != psegs[i] {
			return nil, false
		}
	}
	if len(psegs) != len(rsegs) {
		return nil, false
	}
	return params, true
}
