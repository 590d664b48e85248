package instance_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// Two identity hash keys of the tests (at least 32 bytes each).
const (
	hkKeyA = "slidegate-test-identity-hash-key-A-0001"
	hkKeyB = "slidegate-test-identity-hash-key-B-0002"
	// hkARN is the hash key secret's ARN in the in-process tests.
	hkARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:identity-hash-key-MnOpQr"
)

// hkRedisKey is the Redis key of the anonymous limit 3/1m of an identity.
func hkRedisKey(key, id string) string {
	return "rl:{" + base64.RawURLEncoding.EncodeToString(testkit.IdentityDigest(key, id)) + "}:sw:anonymous:1m"
}

// hkForms are every form the unkeyed hash of an identity takes in Redis
// keys and in logs: neither may ever appear when a key is configured.
func hkForms(id string) []string {
	d := testkit.IdentityDigest("", id)
	return []string{base64.RawURLEncoding.EncodeToString(d), hex.EncodeToString(d), identity.Hash(id)}
}

func hkRedisKeys(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	keys, err := srv.Client(t).Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// TestIdentityHashIsKeyed: with RATE_LIMIT_HASH_KEY, the Redis key, the
// principalId and the log's identity of a caller are its HMAC-SHA-256 with
// the key, not its plain SHA-256, and not its HMAC with another key; two
// runtimes with the same key count one source IP in one bucket.
func TestIdentityHashIsKeyed(t *testing.T) {
	const ip = "203.0.113.9"
	id := identity.KindIP + ip
	cases := []struct {
		name, key string
	}{
		{"no key: plain SHA-256 (as before)", ""},
		{"key A", hkKeyA},
		{"key B", hkKeyB},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			env := ipv6Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": "3/1m", "RATE_LIMIT_HASH_KEY": tc.key})
			first, firstLogs := idRuntime(t, env, instance.Options{Metrics: io.Discard})
			second, secondLogs := idRuntime(t, env, instance.Options{Metrics: io.Discard})
			ctx := context.Background()
			req := apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: ip}
			var allowed []bool
			var principals []string
			for _, rt := range []*instance.Runtime{first, first, second, second} {
				out, err := rt.Decide(ctx, req)
				if err != nil || out.Result.Degraded {
					t.Fatalf("decide: %v (degraded %v)", err, out.Result.Degraded)
				}
				allowed = append(allowed, out.Result.Allowed)
				principals = append(principals, apigw.PrincipalID(out))
			}
			if want := []bool{true, true, true, false}; !slices.Equal(allowed, want) {
				t.Errorf("two runtimes with one key, 4 requests of one IP at 3/1m: allowed %v, want %v", allowed, want)
			}
			wantKey := hkRedisKey(tc.key, id)
			if keys := hkRedisKeys(t, srv); !slices.Equal(keys, []string{wantKey}) {
				t.Errorf("Redis keys %v, want [%s]", keys, wantKey)
			}
			logs := firstLogs.String() + secondLogs.String()
			wantHash := hex.EncodeToString(testkit.IdentityDigest(tc.key, id))
			for _, p := range principals {
				if p != "anonymous:"+wantHash {
					t.Errorf("principalId %q, want anonymous:%s", p, wantHash)
				}
			}
			if !strings.Contains(logs, `"identity":"`+wantHash+`"`) {
				t.Errorf("the denied decision's log line lacks identity %s:\n%s", wantHash, logs)
			}
			for _, other := range []string{"", hkKeyA, hkKeyB} {
				if other == tc.key {
					continue
				}
				h := hex.EncodeToString(testkit.IdentityDigest(other, id))
				if h == wantHash || strings.Contains(logs, h) || strings.Contains(strings.Join(hkRedisKeys(t, srv), " "), base64.RawURLEncoding.EncodeToString(testkit.IdentityDigest(other, id))) {
					t.Errorf("the hash of another key (%q) appears", other)
				}
			}
			if strings.Contains(logs, ip) || (tc.key != "" && strings.Contains(logs, tc.key)) {
				t.Error("the log holds the IP or the key in clear")
			}
			mode := map[bool]string{true: `"identityHash":"hmac"`, false: `"identityHash":"sha256"`}[tc.key != ""]
			if !strings.Contains(logs, mode) {
				t.Errorf("the cold-start line lacks %s", mode)
			}
		})
	}
}

// TestIdentityHashKeyUnavailable: when the hash key secret cannot be read
// at cold start (it does not exist, or its value is shorter than 32
// bytes), or RATE_LIMIT_HASH_KEY is too short, nothing is decided on Redis
// under another hash: fail-open routes are degraded to the local
// fallback, fail-closed routes fail, nothing is written to Redis, and no
// log line or principalId carries the unkeyed hash (or the IP).
func TestIdentityHashKeyUnavailable(t *testing.T) {
	const ip = "198.51.100.77"
	id := identity.KindIP + ip
	cases := []struct {
		name    string
		secrets map[string]string
		env     map[string]string
		wantLog []string
	}{
		{"secret does not exist", map[string]string{}, map[string]string{"RATE_LIMIT_HASH_KEY_SECRET_ARN": hkARN},
			[]string{"read RATE_LIMIT_HASH_KEY_SECRET_ARN failed", "ResourceNotFoundException", `"identityHash":"pending"`}},
		{"secret too short", map[string]string{hkARN: "too-short"}, map[string]string{"RATE_LIMIT_HASH_KEY_SECRET_ARN": hkARN},
			[]string{"read RATE_LIMIT_HASH_KEY_SECRET_ARN failed", "9 bytes; want at least 32"}},
		{"RATE_LIMIT_HASH_KEY too short", nil, map[string]string{"RATE_LIMIT_HASH_KEY": "0123456789abcdef"},
			[]string{"RATE_LIMIT_HASH_KEY: 16 bytes; want at least 32", `"identityHash":"pending"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			sm := mototest.NewSecrets(t, tc.secrets)
			tc.env["RATE_LIMIT_ANONYMOUS"] = "3/1m"
			if arn, ok := tc.env["RATE_LIMIT_HASH_KEY_SECRET_ARN"]; ok {
				tc.env["RATE_LIMIT_HASH_KEY_SECRET_ARN"] = sm.ARN(arn)
			}
			rt, logs := idRuntime(t, ipv6Env(srv.URL(), tc.env), instance.Options{SecretsManager: sm.Client(), Metrics: io.Discard})
			if err := rt.WaitLoaded(context.Background()); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for i := range 5 {
				open, err := rt.Decide(ctx, apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: ip, RequestID: "req"})
				if err != nil || !open.Result.Degraded {
					t.Fatalf("fail-open request %d: degraded=%v err=%v; want degraded", i+1, open.Result.Degraded, err)
				}
				if p := apigw.PrincipalID(open); p != "anonymous:"+apigw.IdentityHashUnavailable {
					t.Errorf("principalId %q, want anonymous:%s", p, apigw.IdentityHashUnavailable)
				}
				if _, err := rt.Decide(ctx, apigw.Request{Method: "POST", Path: "/auth/login", SourceIP: ip}); !errors.Is(err, ratelimit.ErrUnavailable) {
					t.Errorf("fail-closed request %d: err=%v; want unavailable", i+1, err)
				}
			}
			if keys := hkRedisKeys(t, srv); len(keys) != 0 {
				t.Errorf("Redis holds %v; want nothing written without the key", keys)
			}
			log := logs.String()
			for _, want := range append(tc.wantLog, `"identity":"`+apigw.IdentityHashUnavailable+`"`, "identity hash key not read") {
				if !strings.Contains(log, want) {
					t.Errorf("log does not say %q:\n%s", want, log)
				}
			}
			for _, form := range append(hkForms(id), ip) {
				if strings.Contains(log, form) {
					t.Errorf("the log holds %q (the unkeyed hash or the IP)", form)
				}
			}
		})
	}
}

// TestIdentityHashKeyReadAgain: a hash key secret that Secrets Manager
// does not give at cold start (throttled) is read again, on a later
// decision, once the retry interval has passed; from then on decisions are
// made on Redis with the keyed hash, and no unkeyed key is ever written.
// Within the interval Secrets Manager is not asked again.
func TestIdentityHashKeyReadAgain(t *testing.T) {
	const ip = "198.51.100.78"
	id := identity.KindIP + ip
	srv := redistest.StartServer(t)
	sm := mototest.NewSecrets(t, map[string]string{hkARN: hkKeyA})
	sm.Throttle()
	env := ipv6Env(srv.URL(), map[string]string{"RATE_LIMIT_ANONYMOUS": "3/1m", "RATE_LIMIT_HASH_KEY_SECRET_ARN": sm.ARN(hkARN)})
	ctx := context.Background()

	t.Run("within the retry interval: not asked again", func(t *testing.T) {
		rt, _ := idRuntime(t, env, instance.Options{SecretsManager: sm.Client(), SecretRetryInterval: time.Hour, Metrics: io.Discard})
		if err := rt.WaitLoaded(ctx); err != nil {
			t.Fatal(err)
		}
		asked := sm.GetSecretValueCalls()
		for range 20 {
			if out, err := rt.Decide(ctx, apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: ip}); err != nil || !out.Result.Degraded {
				t.Fatalf("want degraded, got %+v %v", out.Result, err)
			}
		}
		if n := sm.GetSecretValueCalls(); n != asked {
			t.Errorf("Secrets Manager asked %d more times within the retry interval, want none", n-asked)
		}
	})

	rt, logs := idRuntime(t, env, instance.Options{SecretsManager: sm.Client(), SecretRetryInterval: 20 * time.Millisecond, Metrics: io.Discard})
	if err := rt.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := rt.Decide(ctx, apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: ip})
	if err != nil || !out.Result.Degraded {
		t.Fatalf("before Secrets Manager answers: degraded=%v err=%v; want degraded", out.Result.Degraded, err)
	}
	sm.Answer()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out, err = rt.Decide(ctx, apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: ip})
		if err == nil && !out.Result.Degraded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decisions still degraded once Secrets Manager answers: %+v %v\n%s", out.Result, err, logs)
		}
	}
	if want := "anonymous:" + hex.EncodeToString(testkit.IdentityDigest(hkKeyA, id)); apigw.PrincipalID(out) != want {
		t.Errorf("principalId %q, want %q", apigw.PrincipalID(out), want)
	}
	if keys := hkRedisKeys(t, srv); !slices.Equal(keys, []string{hkRedisKey(hkKeyA, id)}) {
		t.Errorf("Redis keys %v, want only the keyed %s", keys, hkRedisKey(hkKeyA, id))
	}
	log := logs.String()
	for _, want := range []string{"ThrottlingException", "read RATE_LIMIT_HASH_KEY_SECRET_ARN: identities are hashed with its key"} {
		if !strings.Contains(log, want) {
			t.Errorf("log does not say %q:\n%s", want, log)
		}
	}
	for _, form := range append(hkForms(id), ip, hkKeyA) {
		if strings.Contains(log, form) {
			t.Errorf("the log holds %q (the unkeyed hash, the IP or the key)", form)
		}
	}
}
