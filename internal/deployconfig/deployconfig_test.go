package deployconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParameterOverrides(t *testing.T) {
	const file = `version = 0.1
[default.deploy.parameters]
parameter_overrides = "StageName=default A=1"

[dev.global.parameters]
parameter_overrides = "FromGlobal=yes"

[dev.deploy.parameters]
stack_name = "x"
parameter_overrides = "StageName=dev RateLimitAnonymous=30/1m Quoted=\"a b\" Subnets=subnet-1,subnet-2"

[list.deploy.parameters]
parameter_overrides = [
  "A=1",
  'B=two words',
]

[global.global.parameters]
parameter_overrides = 'Only=global'
`
	path := filepath.Join(t.TempDir(), "samconfig.toml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		env  string
		want map[string]string
	}{
		{"dev", map[string]string{"StageName": "dev", "RateLimitAnonymous": "30/1m", "Quoted": "a b", "Subnets": "subnet-1,subnet-2"}},
		{"list", map[string]string{"A": "1", "B": "two words"}},
		{"global", map[string]string{"Only": "global"}},
		{"absent", map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.env, func(t *testing.T) {
			got, err := ParameterOverrides(path, c.env)
			if err != nil {
				t.Fatalf("%v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// TestSamconfigIsReadAsTOML: the file is TOML, read by a TOML library, so
// what TOML allows (comments, inline tables, dotted keys) reads as SAM CLI
// reads it, and what TOML refuses is an error naming the file.
func TestSamconfigIsReadAsTOML(t *testing.T) {
	cases := []struct {
		name, body, env string
		want            map[string]string
		wantEnv         bool
		wantErr         bool
	}{
		{name: "comments and a multi-line basic string", env: "dev", wantEnv: true,
			body: "# top\n[dev.deploy.parameters] # trailing\nparameter_overrides = \"\"\"\nA=1\nB=2\"\"\"\n",
			want: map[string]string{"A": "1", "B": "2"}},
		{name: "dotted keys", env: "dev", wantEnv: true,
			body: "dev.deploy.parameters.parameter_overrides = 'A=1'\n",
			want: map[string]string{"A": "1"}},
		{name: "another command's table only", env: "dev", wantEnv: true,
			body: "[dev.build.parameters]\ncached = true\n",
			want: map[string]string{}},
		{name: "neither string nor array", env: "dev", wantEnv: true, wantErr: true,
			body: "[dev.deploy.parameters]\nparameter_overrides = 3\n"},
		{name: "array of non-strings", env: "dev", wantEnv: true, wantErr: true,
			body: "[dev.deploy.parameters]\nparameter_overrides = [1, 2]\n"},
		{name: "not TOML", env: "dev", wantErr: true,
			body: "[dev.deploy.parameters\nparameter_overrides = 'A=1'\n"},
		{name: "duplicate key", env: "dev", wantErr: true,
			body: "[dev.deploy.parameters]\nparameter_overrides = 'A=1'\nparameter_overrides = 'A=2'\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "samconfig.toml")
			if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ParameterOverrides(path, c.env)
			if c.wantErr {
				if err == nil {
					t.Fatalf("ParameterOverrides = %v, want an error", got)
				}
			} else if err != nil {
				t.Fatalf("ParameterOverrides: %v", err)
			} else if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParameterOverrides = %v, want %v", got, c.want)
			}
			has, err := HasEnvironment(path, c.env)
			if err != nil {
				if c.wantEnv {
					t.Fatalf("HasEnvironment: %v", err)
				}
				return
			}
			if has != c.wantEnv {
				t.Errorf("HasEnvironment = %v, want %v", has, c.wantEnv)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	spec := &Spec{Routes: []Route{
		{Method: "GET", Resource: "/{proxy+}", Function: "Proxy"},
		{Method: "GET", Resource: "/items/{id}", Function: "Item"},
		{Method: "GET", Resource: "/items/special", Function: "Special"},
		{Method: "ANY", Resource: "/any", Function: "Any"},
	}}
	sortRoutes(spec.Routes)
	cases := []struct {
		method, path string
		function     string
		params       map[string]string
	}{
		{"GET", "/items/special", "Special", map[string]string{}},
		{"GET", "/items/42", "Item", map[string]string{"id": "42"}},
		{"GET", "/a/b/c", "Proxy", map[string]string{"proxy": "a/b/c"}},
		{"DELETE", "/any", "Any", map[string]string{}},
		{"POST", "/items/42", "", nil},
		{"GET", "/", "", nil},
	}
	for _, c := range cases {
		r, params, ok := spec.Match(c.method, c.path)
		if c.function == "" {
			if ok {
				t.Errorf("%s %s: matched %s, want no route", c.method, c.path, r.Function)
			}
			continue
		}
		if !ok || r.Function != c.function || !reflect.DeepEqual(params, c.params) {
			t.Errorf("%s %s: got %s %v (%v), want %s %v", c.method, c.path, r.Function, params, ok, c.function, c.params)
		}
	}
}

func TestLoadTemplate(t *testing.T) {
	spec, err := Load("../../template.yaml", "../../samconfig.toml", "prod")
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !spec.HasAuthorizer || len(spec.IdentityHeaders) != 0 {
		t.Errorf("authorizer %v, identity headers %v", spec.HasAuthorizer, spec.IdentityHeaders)
	}
	if got := spec.StageVariables["rateLimitAnonymous"]; got == "" {
		t.Errorf("no rateLimitAnonymous stage variable")
	}
	for _, typ := range []string{"ACCESS_DENIED", "AUTHORIZER_FAILURE", "AUTHORIZER_CONFIGURATION_ERROR"} {
		if _, ok := spec.Responses[typ]; !ok {
			t.Errorf("no %s gateway response", typ)
		}
	}
	if r, _, ok := spec.Match("GET", "/health"); !ok || r.Authorized {
		t.Errorf("GET /health: %+v %v, want an unauthorized route", r, ok)
	}
	for name := range spec.Environment {
		if awsOnlyVariables[name] {
			t.Errorf("environment keeps AWS-only %s", name)
		}
	}
}
