package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cliHashKey is the identity hash key of the command's tests.
const cliHashKey = "cli-test-identity-hash-key-0123456789abcdef"

// repoRun is what one run of the command printed and its exit status.
type repoRun struct {
	code           int
	stdout, stderr string
}

// runRepo runs the command in-process with exactly vars as its
// environment (getenv and environ), against the repository's template.yaml
// and samconfig.toml unless args say otherwise.
func runRepo(t *testing.T, vars map[string]string, stdin string, args ...string) repoRun {
	t.Helper()
	full := append([]string{}, args...)
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		full = append([]string{args[0], "--template", "../../template.yaml", "--samconfig", "../../samconfig.toml"}, args[1:]...)
	}
	var out, errOut bytes.Buffer
	e := env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut,
		getenv: func(k string) string { return vars[k] },
		environ: func() []string {
			var kv []string
			for k, v := range vars {
				kv = append(kv, k+"="+v)
			}
			return kv
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := run(ctx, full, e)
	return repoRun{code: code, stdout: out.String(), stderr: errOut.String()}
}

// TestSlidegateCallerErrors: a command line without exactly one valid
// caller is a usage error (2); a Redis that cannot be reached, or none at
// all, is one clear line and exit status 1, in bounded time.
func TestSlidegateCallerErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	env := map[string]string{"REDIS_URL": "redis://:secret-password@" + closed, "RATE_LIMIT_HASH_KEY": cliHashKey}
	// A server that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	silentEnv := map[string]string{"REDIS_URL": "redis://" + silent.Addr().String(), "RATE_LIMIT_HASH_KEY": cliHashKey}
	cases := []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stderr string
	}{
		{"no caller", env, []string{"inspect"}, 2, "exactly one of"},
		{"two callers", env, []string{"inspect", "--ip", "203.0.113.7", "--sub", "alice"}, 2, "exactly one of"},
		{"bad address", env, []string{"inspect", "--ip", "not-an-ip"}, 2, "not an IP address"},
		{"bad key hash", env, []string{"reset", "--api-key-hash", "abc"}, 2, "64 hex digits"},
		{"unknown flag", env, []string{"inspect", "--nope"}, 2, "flag provided but not defined"},
		{"unknown command", env, []string{"inspekt"}, 2, "unknown command"},
		{"unreachable redis", env, []string{"inspect", "--ip", "203.0.113.7", "--timeout", "2s"}, 1, "slidegate inspect: cannot reach Redis at " + closed},
		{"unreachable redis, reset", env, []string{"reset", "--yes", "--sub", "alice", "--timeout", "2s"}, 1, "slidegate reset: cannot reach Redis at " + closed},
		{"redis that never answers", silentEnv, []string{"inspect", "--ip", "203.0.113.7", "--timeout", "1s"}, 1, "slidegate inspect: cannot reach Redis at " + silent.Addr().String()},
		{"no REDIS_URL", map[string]string{"RATE_LIMIT_HASH_KEY": cliHashKey}, []string{"inspect", "--ip", "203.0.113.7"}, 1, "REDIS_URL is not set"},
		{"short hash key", map[string]string{"REDIS_URL": "redis://" + closed, "RATE_LIMIT_HASH_KEY": "short"}, []string{"inspect", "--ip", "203.0.113.7"}, 1, "RATE_LIMIT_HASH_KEY is shorter than 32 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			r := runRepo(t, c.env, "", c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d, want %d; stderr does not say %q:\n%s", r.code, c.code, c.stderr, r.stderr)
			}
			if strings.Contains(r.stderr, "secret-password") {
				t.Errorf("stderr shows the URL's password:\n%s", r.stderr)
			}
			// One line says what failed; any other is a warning.
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			for _, line := range lines[:len(lines)-1] {
				if c.code == 1 && !strings.HasPrefix(line, "warning: ") {
					t.Errorf("want the error alone on stderr, got:\n%s", r.stderr)
				}
			}
			// Never hangs: a generous bound over --timeout, not a speed claim.
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("took %s", took)
			}
		})
	}
}

// TestSlidegateCheck: check passes the shipped samconfig.toml stages,
// fails (exit status 1) on each configuration the functions or
// CloudFormation would refuse, naming it, and warns of the risky ones.
func TestSlidegateCheck(t *testing.T) {
	// The shipped samconfig.toml with its placeholders replaced, as a
	// user deploys it: the cases below check one thing each on it.
	shipped, err := os.ReadFile("../../samconfig.toml")
	if err != nil {
		t.Fatal(err)
	}
	deployable := filepath.Join(t.TempDir(), "samconfig.toml")
	if err := os.WriteFile(deployable, []byte(strings.NewReplacer("VpcId=vpc-REPLACE_ME SubnetIds=subnet-REPLACE_ME_A,subnet-REPLACE_ME_B", deployableIDs).Replace(string(shipped))), 0o600); err != nil {
		t.Fatal(err)
	}
	samconfig := func(overrides string) string {
		path := filepath.Join(t.TempDir(), "samconfig.toml")
		body := "version = 0.1\n[dev.deploy.parameters]\nparameter_overrides = \"" + overrides + " " + deployableIDs + "\"\n"
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		// says must appear on stdout, each as "error: ..." or "warning: ...".
		says []string
	}{
		// Issue 41: the placeholders CloudFormation refuses are errors.
		{"shipped dev", nil, []string{"--stage", "dev", "--samconfig", "../../samconfig.toml"}, 1, []string{`error: samconfig.toml [dev] VpcId="vpc-REPLACE_ME": a placeholder`, "2 errors, 0 warnings"}},
		{"shipped prod", nil, []string{"--stage", "prod", "--samconfig", "../../samconfig.toml"}, 1, []string{`error: samconfig.toml [prod] SubnetIds="subnet-REPLACE_ME_A,subnet-REPLACE_ME_B": a placeholder`, "2 errors, 0 warnings"}},
		{"dev, placeholders replaced", nil, []string{"--stage", "dev"}, 0, []string{"0 errors, 0 warnings"}},
		{"prod, placeholders replaced", nil, []string{"--stage", "prod"}, 0, []string{"0 errors, 0 warnings", "anonymous     60/1m"}},
		{"bad tier value", map[string]string{"RATE_LIMIT_USER": "lots"}, nil, 1, []string{`error: RATE_LIMIT_USER="lots"`}},
		{"limit above the exact-arithmetic cap", map[string]string{"RATE_LIMIT_ORG": "1000000/720h"}, nil, 1, []string{`error: RATE_LIMIT_ORG="1000000/720h"`, "2^50"}},
		{"bad route", map[string]string{"RATE_LIMIT_ROUTES": "POST auth=5/1m"}, nil, 1, []string{`error: RATE_LIMIT_ROUTES="POST auth=5/1m"`}},
		{"bad fail-closed glob", map[string]string{"RATE_LIMIT_FAIL_CLOSED": "auth/*"}, nil, 1, []string{"error: RATE_LIMIT_FAIL_CLOSED"}},
		{"bad fallback instances", map[string]string{"RATE_LIMIT_FALLBACK_INSTANCES": "0"}, nil, 1, []string{"error: RATE_LIMIT_FALLBACK_INSTANCES"}},
		// Issue 20: what loosens a limit is refused or warned about.
		{"route listed twice", map[string]string{"RATE_LIMIT_ROUTES": "POST /auth/*=5/1m:sliding-log,GET /v1/items=10/1m,GET /v1/items=10/1m"}, nil, 1, []string{`error: RATE_LIMIT_ROUTES=`, "GET /v1/items is given twice"}},
		{"cost listed twice", map[string]string{"RATE_LIMIT_COSTS": "GET /v1/items=2,GET /v1/items=3"}, nil, 1, []string{`error: RATE_LIMIT_COSTS=`, "GET /v1/items is given twice"}},
		{"CIDR with host bits", map[string]string{"RATE_LIMIT_NETWORKS": "10.0.0.0/0=unlimited"}, nil, 1, []string{`error: RATE_LIMIT_NETWORKS="10.0.0.0/0=unlimited"`, "host bits"}},
		{"wide unlimited network", map[string]string{"RATE_LIMIT_NETWORKS": "10.0.0.0/7=unlimited,2001::/16=pro"}, nil, 0, []string{"warning: network 10.0.0.0/7=unlimited is shorter than /8", "warning: network 2001::/16=pro is shorter than /32"}},
		{"shadowed tier", map[string]string{"RATE_LIMIT_SHADOW": "anonymous"}, nil, 0, []string{"warning: tier anonymous is shadowed"}},
		{"overlapping costs", map[string]string{"RATE_LIMIT_COSTS": "GET /v1/*=1,GET /v1/items=5"}, nil, 0, []string{"warning: costs GET /v1/*=1 and GET /v1/items=5 overlap: a request matching both costs 5"}},
		{"bad stage variable", nil, []string{"--stage-var", "rateLimitQuota=10/1x"}, 1, []string{`error: stage variable rateLimitQuota="10/1x"`}},
		{"samconfig: unknown parameter", nil, []string{"--samconfig", samconfig("RateLimitAnonymus=5/1m")}, 1, []string{"the template has no parameter RateLimitAnonymus"}},
		{"samconfig: value outside the pattern", nil, []string{"--samconfig", samconfig("RateLimitAnonymous=lots")}, 1, []string{"RateLimitAnonymous=\"lots\": does not match the parameter's AllowedPattern"}},
		{"samconfig: value outside the allowed values", nil, []string{"--samconfig", samconfig("RateLimitAlgorithm=fastest")}, 1, []string{"not one of the parameter's AllowedValues"}},
		{"samconfig: number below its minimum", nil, []string{"--samconfig", samconfig("ThrottleRateLimit=0")}, 1, []string{"below the parameter's MinValue 1"}},
		{"samconfig: allowed by the template, refused by the functions", nil, []string{"--samconfig", samconfig("RateLimitAnonymous=1000000/720h")}, 1, []string{`error: stage variable rateLimitAnonymous="1000000/720h"`, "2^50"}},
		{"login route fails open", map[string]string{"RATE_LIMIT_FAIL_CLOSED": "none"}, nil, 0, []string{"warning: login route POST /auth/login fails open", `warning: login route limit "POST /auth/*" fails open`}},
		{"approximate algorithm on an auth route", map[string]string{"RATE_LIMIT_ROUTES": "POST /auth/*=5/1m:token-bucket"}, nil, 0, []string{`warning: login route limit "POST /auth/*" is token-bucket, an approximate algorithm`}},
		{"login route without a limit", map[string]string{"RATE_LIMIT_ROUTES": "none"}, nil, 0, []string{"warning: login route POST /auth/login has no route limit of its own"}},
		{"fallback share larger than the limit", map[string]string{"RATE_LIMIT_FALLBACK_INSTANCES": "100"}, nil, 0, []string{`warning: fallback share of "anonymous" (30/1m) is larger than the limit`}},
		{"stage variable that overrides nothing", nil, []string{"--stage-var", "rateLimitAnon=3/1m"}, 0, []string{"warning: stage variable rateLimitAnon (--stage-var) overrides nothing"}},
		{"environment variable that overrides nothing", map[string]string{"RATE_LIMIT_ANONYMUS": "3/1m"}, nil, 0, []string{"warning: environment variable RATE_LIMIT_ANONYMUS overrides nothing"}},
		{"stage samconfig.toml does not name", nil, []string{"--stage", "prdo"}, 1, []string{`warning: samconfig.toml has no environment "prdo": the settings shown are the template's defaults`, "no value for the template parameter VpcId", "2 errors, 1 warnings"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runRepo(t, c.env, "", append([]string{"check", "--samconfig", deployable}, c.args...)...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", r.code, c.code, r.stdout, r.stderr)
			}
			for _, s := range c.says {
				if !strings.Contains(r.stdout, s) {
					t.Errorf("output does not say %q:\n%s%s", s, r.stdout, r.stderr)
				}
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		r := runRepo(t, map[string]string{"RATE_LIMIT_USER": "lots", "RATE_LIMIT_FAIL_CLOSED": "none"}, "", "check", "--json", "--samconfig", deployable)
		var rep struct {
			Limits   []struct{ Name, Limit, Algorithm string }
			Routes   []struct{ Method, Resource string }
			Errors   []string
			Warnings []string
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		// Five limits, and the shipped dev stage's two plans.
		if r.code != 1 || len(rep.Errors) == 0 || len(rep.Warnings) < 2 || len(rep.Limits) != 7 || len(rep.Routes) == 0 {
			t.Errorf("exit %d, %+v", r.code, rep)
		}
		for _, e := range rep.Errors {
			if !strings.Contains(strings.ToLower(e), "ratelimituser") && !strings.Contains(e, "RATE_LIMIT_USER") {
				t.Errorf("error %q is not about RATE_LIMIT_USER", e)
			}
		}
	})
	t.Run("unreadable samconfig", func(t *testing.T) {
		r := runRepo(t, nil, "", "check", "--samconfig", samconfig(`A=1 B="unterminated`))
		if r.code != 1 || !strings.Contains(r.stderr, "slidegate check: samconfig") {
			t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// deployableIDs are a VPC and two subnets as a user puts them in place of
// samconfig.toml's placeholders.
const deployableIDs = "VpcId=vpc-0a1b2c3d4e5f60718 SubnetIds=subnet-0a1b2c3d4e5f60718,subnet-0a1b2c3d4e5f60719"
