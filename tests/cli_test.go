package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/deployconfig"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// cliHashKey is the identity hash key the functions and the command share
// in these tests.
const cliHashKey = "cli-test-identity-hash-key-0123456789abcdef"

// cliRun is one run of the slidegate command.
type cliRun struct {
	code           int
	stdout, stderr string
}

// runSlidegate runs the built command in tests/ with exactly env (and
// PATH), stdin as its input, against the repository's template.yaml and
// samconfig.toml unless args say otherwise.
func runSlidegate(t *testing.T, env map[string]string, stdin string, args ...string) cliRun {
	t.Helper()
	bin := lambdatest.BuildBootstrap(t, "./cmd/slidegate")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{}, args...)
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		full = append([]string{args[0], "--template", "../template.yaml", "--samconfig", "../samconfig.toml"}, args[1:]...)
	}
	cmd := exec.CommandContext(ctx, bin, full...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run := cliRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		run.code = exit.ExitCode()
	default:
		t.Fatalf("run slidegate %v: %v", args, err)
	}
	if strings.Contains(run.stderr, "goroutine ") || strings.Contains(run.stderr, "panic:") {
		t.Fatalf("slidegate %v panicked:\n%s", args, run.stderr)
	}
	return run
}

// cliInspection is the JSON of slidegate inspect --json.
type cliInspection struct {
	Tier     string `json:"tier"`
	Identity string `json:"identity"`
	Hash     string `json:"hash"`
	Allowed  bool   `json:"allowed"`
	Limits   []struct {
		Name              string `json:"name"`
		Count             int64  `json:"count"`
		Used              int64  `json:"used"`
		Remaining         int64  `json:"remaining"`
		ResetSeconds      int64  `json:"resetSeconds"`
		RetryAfterSeconds int64  `json:"retryAfterSeconds"`
		Allowed           bool   `json:"allowed"`
	} `json:"limits"`
	InFlight []struct {
		Name                    string `json:"name"`
		Max                     int64  `json:"max"`
		Held                    int64  `json:"held"`
		EarliestLeaseEndSeconds int64  `json:"earliestLeaseEndSeconds"`
	} `json:"inFlight"`
}

func inspectJSON(t *testing.T, env map[string]string, caller ...string) cliInspection {
	t.Helper()
	r := runSlidegate(t, env, "", append([]string{"inspect", "--stage", "dev", "--stage-var", "rateLimitAlgorithm=sliding-log", "--json"}, caller...)...)
	if r.code != 0 {
		t.Fatalf("inspect %v: exit %d\n%s%s", caller, r.code, r.stdout, r.stderr)
	}
	var in cliInspection
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("inspect %v: %v\n%s", caller, err, r.stdout)
	}
	return in
}

// used maps each limit's name to its used count.
func (in cliInspection) used() map[string]int64 {
	m := map[string]int64{}
	for _, l := range in.Limits {
		m[l.Name] = l.Used
	}
	return m
}

// devFunction is the API function of the dev stage as AWS runs it: the
// template's environment with the dev stage's samconfig.toml values, on
// the given Redis, with the test hash key, and the stage variable
// rateLimitAlgorithm=sliding-log; decide sends it one request with the
// stage's variables.
type devFunction struct {
	rt        *instance.Runtime
	stageVars map[string]string
}

func startDevFunction(t *testing.T, redisEnv map[string]string) *devFunction {
	t.Helper()
	spec, err := deployconfig.Load("../template.yaml", "../samconfig.toml", "dev")
	if err != nil {
		t.Fatal(err)
	}
	env := spec.EnvironmentOf("ApiFunction")
	for k, v := range redisEnv {
		env[k] = v
	}
	// Exact counts: a sliding window's count decays once the minute
	// ends, which a slow machine may reach between a request and the
	// inspection of it.
	spec.StageVariables["rateLimitAlgorithm"] = "sliding-log"
	rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] }, instance.Options{Logger: slog.New(slog.DiscardHandler), Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return &devFunction{rt: rt, stageVars: spec.StageVariables}
}

func (f *devFunction) decide(t *testing.T, method, path, ip string, headers map[string]string) bool {
	t.Helper()
	out, err := f.rt.Decide(context.Background(), apigw.Request{Method: method, Path: path, SourceIP: ip, Headers: headers, StageVariables: f.stageVars})
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return out.Result.Allowed && !out.Result.Degraded
}

// TestSlidegateInspectAndReset: after N requests of a caller, slidegate
// inspect shows N used on each of its limits, on a single node and a
// cluster; a denied caller that slidegate reset clears is allowed again.
func TestSlidegateInspectAndReset(t *testing.T) {
	topologies := []struct {
		name  string
		redis func(t *testing.T) map[string]string
	}{
		{"single node", func(t *testing.T) map[string]string {
			return map[string]string{"REDIS_URL": redistest.StartServer(t).URL()}
		}},
		{"cluster", func(t *testing.T) map[string]string {
			addrs := redistest.StartCluster(t, 3, 0).Addrs()
			return map[string]string{"REDIS_URL": "redis://" + addrs[0], "REDIS_CLUSTER": "true"}
		}},
	}
	const orgKey = "cli-test-org-key"
	sum := sha256.Sum256([]byte(orgKey))
	lambdatest.BuildBootstrap(t, "./cmd/slidegate")
	for _, topo := range topologies {
		t.Run(topo.name, func(t *testing.T) {
			env := topo.redis(t)
			env["RATE_LIMIT_HASH_KEY"] = cliHashKey
			env["REDIS_TIMEOUT"] = "1s"
			fnEnv := map[string]string{"API_KEY_HASHES": hex.EncodeToString(sum[:])}
			for k, v := range env {
				fnEnv[k] = v
			}
			fn := startDevFunction(t, fnEnv)

			const ip = "203.0.113.7"
			for range 7 {
				fn.decide(t, "GET", "/v1/items", ip, nil)
			}
			for range 2 {
				fn.decide(t, "POST", "/auth/login", ip, nil)
			}
			for range 3 {
				fn.decide(t, "GET", "/v1/items", "198.51.100.9", map[string]string{"x-api-key": orgKey})
			}

			in := inspectJSON(t, env, "--ip", ip)
			if in.Tier != "anonymous" || in.Identity != "ip:"+ip || !in.Allowed {
				t.Errorf("inspect --ip: %+v", in)
			}
			want := map[string]int64{"anonymous": 9, "POST /auth/*": 2, "quota": 0}
			if got := in.used(); !mapsEqual(got, want) {
				t.Errorf("inspect --ip: used %v, want %v", got, want)
			}
			for _, l := range in.Limits {
				if l.Remaining != l.Count-l.Used {
					t.Errorf("%s: remaining %d of %d with %d used", l.Name, l.Remaining, l.Count, l.Used)
				}
			}
			org := inspectJSON(t, env, "--api-key", orgKey)
			if got := org.used(); org.Tier != "org" || got["org"] != 3 {
				t.Errorf("inspect --api-key: tier %s, used %v; want org with 3 used", org.Tier, got)
			}
			if byHash := inspectJSON(t, env, "--api-key-hash", hex.EncodeToString(sum[:])); byHash.Hash != org.Hash || byHash.used()["org"] != 3 {
				t.Errorf("inspect --api-key-hash: %+v, want the key's", byHash)
			}

			// The readable table says the same.
			r := runSlidegate(t, env, "", "inspect", "--stage", "dev", "--stage-var", "rateLimitAlgorithm=sliding-log", "--ip", ip)
			if r.code != 0 || !containsFields(r.stdout, "anonymous", "30/1m", "sliding-log", "9", "21") {
				t.Errorf("inspect table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}

			// Deny the caller, then reset it.
			for i := 0; fn.decide(t, "GET", "/v1/items", ip, nil); i++ {
				if i > 30 {
					t.Fatal("never denied")
				}
			}
			denied := inspectJSON(t, env, "--ip", ip)
			if denied.Allowed || denied.Limits[0].RetryAfterSeconds < 1 {
				t.Fatalf("inspect after the denial: %+v", denied)
			}
			if r := runSlidegate(t, env, "n\n", "reset", "--stage", "dev", "--stage-var", "rateLimitAlgorithm=sliding-log", "--ip", ip); r.code != 1 || !strings.Contains(r.stderr, "not confirmed") {
				t.Errorf("reset answered n: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if in := inspectJSON(t, env, "--ip", ip); in.Allowed {
				t.Fatalf("an unconfirmed reset cleared the caller: %+v", in)
			}
			r = runSlidegate(t, env, "", "reset", "--stage", "dev", "--stage-var", "rateLimitAlgorithm=sliding-log", "--yes", "--ip", ip)
			if r.code != 0 || !strings.Contains(r.stdout, "cleared ip:"+ip) || !strings.Contains(r.stdout, "2 of 3 limits had counters") ||
				!strings.Contains(r.stdout, "anonymous 30/1m sliding-log: 30 used before") {
				t.Fatalf("reset --yes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			// Another instance (this one remembers its denial until the
			// Retry-After it gave) admits the caller again.
			if !startDevFunction(t, fnEnv).decide(t, "GET", "/v1/items", ip, nil) {
				t.Fatal("denied after reset")
			}
			after := inspectJSON(t, env, "--ip", ip)
			if got := after.used(); !after.Allowed || !mapsEqual(got, map[string]int64{"anonymous": 1, "POST /auth/*": 0, "quota": 0}) {
				t.Errorf("after reset and one request: %+v", after)
			}
			if again := inspectJSON(t, env, "--api-key", orgKey); again.used()["org"] != 3 {
				t.Errorf("resetting the IP cleared the org caller: %v", again.used())
			}
		})
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// containsFields reports whether some line of s holds exactly these
// whitespace-separated fields first.
func containsFields(s string, fields ...string) bool {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

// TestSlidegateSecretsFromSecretsManager: the command reads the Redis AUTH
// token and the identity hash key from Secrets Manager as the functions do
// (the SDK against moto_server's Secrets Manager), so it
// reads the very counts of a function given the same key; a secret it
// cannot read is one clear error.
func TestSlidegateSecretsFromSecretsManager(t *testing.T) {
	const redisARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:cli-redis-auth-AbCdEf"
	password := testkit.RandomSecret(t)
	srv := redistest.StartServer(t)
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: password})
		defer c.Close()
		_ = c.ConfigSet(context.Background(), "requirepass", "").Err()
	})
	sm := mototest.NewSecrets(t, map[string]string{redisARN: password, hkARN: hkKeyA})

	fn := startDevFunction(t, map[string]string{
		"REDIS_URL":           "redis://:" + password + "@" + srv.Addr(),
		"RATE_LIMIT_HASH_KEY": hkKeyA,
		"API_KEY_HASHES":      strings.Repeat("0", 64),
	})
	for range 4 {
		if !fn.decide(t, "GET", "/v1/items", "192.0.2.44", nil) {
			t.Fatal("denied")
		}
	}
	env := withEnv(sm.Env(), map[string]string{
		"REDIS_URL":                      srv.URL(),
		"REDIS_AUTH_SECRET_ARN":          sm.ARN(redisARN),
		"RATE_LIMIT_HASH_KEY_SECRET_ARN": sm.ARN(hkARN),
	})
	if got := inspectJSON(t, env, "--ip", "192.0.2.44").used()["anonymous"]; got != 4 {
		t.Errorf("inspect with the secrets: %d used, want 4", got)
	}

	for _, c := range []struct{ variable, says string }{
		{"RATE_LIMIT_HASH_KEY_SECRET_ARN", "slidegate inspect: RATE_LIMIT_HASH_KEY_SECRET_ARN: read secret"},
		{"REDIS_AUTH_SECRET_ARN", "slidegate inspect: REDIS_AUTH_SECRET_ARN: read secret"},
	} {
		bad := maps.Clone(env)
		bad[c.variable] = "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-XxXxXx"
		r := runSlidegate(t, bad, "", "inspect", "--ip", "192.0.2.44")
		if r.code != 1 || !strings.Contains(r.stderr, c.says) || strings.Contains(r.stderr, password) {
			t.Errorf("%s unreadable: exit %d\n%s", c.variable, r.code, r.stderr)
		}
	}
}

// TestSlidegateInspectShowsInFlightSlots: inspect shows the slots a
// caller holds of its in-flight limits (RATE_LIMIT_CONCURRENCY), read
// under the functions' key prefix and identity hash key.
func TestSlidegateInspectShowsInFlightSlots(t *testing.T) {
	srv := redistest.StartServer(t)
	env := map[string]string{
		"REDIS_URL":              srv.URL(),
		"RATE_LIMIT_HASH_KEY":    cliHashKey,
		"REDIS_TIMEOUT":          "1s",
		"RATE_LIMIT_CONCURRENCY": "anonymous=3,GET /v1/slow=1",
	}
	lambdatest.BuildBootstrap(t, "./cmd/slidegate")
	limiter, err := ratelimit.NewLimiter(srv.Client(t), ratelimit.Options{IdentityHashKey: []byte(cliHashKey), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gate := ratelimit.NewGate(limiter, ratelimit.GateOptions{})
	const ip = "203.0.113.8"
	for range 2 {
		s, err := gate.Acquire(context.Background(), ratelimit.FailClosed, "ip:"+ip, ratelimit.ConcurrencyLimit{Name: "anonymous", Max: 3, Lease: time.Minute})
		if err != nil || !s.Acquired {
			t.Fatalf("acquire: %+v, %v", s, err)
		}
	}
	in := inspectJSON(t, env, "--ip", ip)
	if len(in.InFlight) != 2 || in.InFlight[0].Name != "anonymous" || in.InFlight[0].Max != 3 || in.InFlight[0].Held != 2 ||
		in.InFlight[0].EarliestLeaseEndSeconds < 1 || in.InFlight[0].EarliestLeaseEndSeconds > 60 ||
		in.InFlight[1].Name != "GET /v1/slow" || in.InFlight[1].Held != 0 {
		t.Fatalf("inspect in flight: %+v; want 2 of 3 anonymous slots held, none of GET /v1/slow", in.InFlight)
	}
	r := runSlidegate(t, env, "", "inspect", "--stage", "dev", "--ip", ip)
	if r.code != 0 || !strings.Contains(r.stdout, "IN-FLIGHT LIMIT") || !containsFields(r.stdout, "anonymous", "3", "2") {
		t.Errorf("inspect table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
