package instance_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// smRedisARN is the Redis AUTH secret's ARN in the in-process tests.
const smRedisARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:redis-auth-QrStUv"

// TestRedisAuthSecretFailures: the Redis AUTH token is read at cold start
// through the real aws-sdk-go-v2 client. When Secrets Manager cannot give
// it (the secret does not exist; requests are throttled, which the SDK
// retries; no answer at all) the read is bounded, the log says clearly
// what failed, and the runtime still comes up and decides: no connection
// opens, fail-open routes degrade to the local fallback and fail-closed
// routes fail. Within the retry interval (30 s) nothing asks Secrets
// Manager again. The password never reaches the log.
func TestRedisAuthSecretFailures(t *testing.T) {
	cases := []struct {
		name         string
		create       bool                    // the secret exists, holding the password
		fault        func(*mototest.Secrets) // what the endpoint does wrong, if anything
		wantDegraded bool
		wantLog      []string
		wantRequests func(n int) bool
	}{
		{
			name:         "secret read",
			create:       true,
			wantRequests: func(n int) bool { return n == 1 },
		},
		{
			name:         "secret does not exist",
			wantDegraded: true,
			wantLog:      []string{"read REDIS_AUTH_SECRET_ARN failed", smRedisARN, "ResourceNotFoundException", "can't find the specified secret", "until a later read succeeds", `"auth":"secret-pending"`},
			wantRequests: func(n int) bool { return n == 1 }, // not retried within the interval
		},
		{
			name:         "throttled",
			create:       true,
			fault:        (*mototest.Secrets).Throttle,
			wantDegraded: true,
			wantLog:      []string{"read REDIS_AUTH_SECRET_ARN failed", "secret:redis-auth-QrStUv", "ThrottlingException", "Rate exceeded", "maximum number of attempts", "until a later read succeeds"},
			wantRequests: func(n int) bool { return n == 3 }, // the SDK's standard three attempts
		},
		{
			name:         "no answer",
			create:       true,
			fault:        (*mototest.Secrets).Hang,
			wantDegraded: true,
			wantLog:      []string{"read REDIS_AUTH_SECRET_ARN failed", "secret:redis-auth-QrStUv", "no answer from Secrets Manager: the function's subnets have no route to it; deploy the template with VpcEndpoints=create (an interface endpoint com.amazonaws.", "deadline exceeded", "until a later read succeeds"},
			wantRequests: func(n int) bool { return n >= 1 },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			password := testkit.RandomSecret(t)
			secrets := map[string]string{}
			if tc.create {
				secrets[smRedisARN] = password
			}
			sm := mototest.NewSecrets(t, secrets)
			if tc.fault != nil {
				tc.fault(sm)
			}
			srv := redistest.StartServerWith(t, redistest.Options{Admin: true})
			if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
				t.Fatal(err)
			}

			env := connEnv(srv.URL(), map[string]string{"REDIS_AUTH_SECRET_ARN": sm.ARN(smRedisARN), "REDIS_TIMEOUT": "100ms"})
			rt, logs := idRuntime(t, env, instance.Options{SecretsManager: sm.Client()})

			ctx := context.Background()
			open, err := rt.Decide(ctx, apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "192.0.2.46"})
			if err != nil || !open.Result.Allowed || open.Result.Degraded != tc.wantDegraded {
				t.Errorf("fail-open route: allowed=%v degraded=%v err=%v; want allowed with degraded=%v", open.Result.Allowed, open.Result.Degraded, err, tc.wantDegraded)
			}
			_, err = rt.Decide(ctx, apigw.Request{Method: "POST", Path: "/auth/login", SourceIP: "192.0.2.46"})
			if got := errors.Is(err, ratelimit.ErrUnavailable); got != tc.wantDegraded {
				t.Errorf("fail-closed route: err=%v; want unavailable=%v", err, tc.wantDegraded)
			}
			for _, want := range tc.wantLog {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log does not say %q:\n%s", want, logs)
				}
			}
			if strings.Contains(logs.String(), password) {
				t.Error("the Redis password reached the log")
			}
			if n := sm.GetSecretValueCalls(); !tc.wantRequests(n) {
				t.Errorf("Secrets Manager got %d requests", n)
			}
		})
	}
}

// TestRedisAuthSecretReadAgain: a Redis AUTH secret that Secrets Manager
// does not give at cold start (throttled, or no answer in time) is read
// again when a connection needs it, once the retry interval has passed:
// decisions stop being degraded once Secrets Manager answers, without a
// new cold start. Once read, the token is kept: new connections
// authenticate with it without asking AWS again. The password never
// reaches the log.
func TestRedisAuthSecretReadAgain(t *testing.T) {
	cases := []struct {
		name    string
		fault   func(*mototest.Secrets)
		wantLog string // what the cold-start read failed with
	}{
		{"throttled at cold start", (*mototest.Secrets).Throttle, "ThrottlingException"},
		{"no answer at cold start", (*mototest.Secrets).Hang, "no answer from Secrets Manager: the function's subnets have no route to it; deploy the template with VpcEndpoints=create (an interface endpoint com.amazonaws."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			password := testkit.RandomSecret(t)
			sm := mototest.NewSecrets(t, map[string]string{smRedisARN: password})
			tc.fault(sm)
			srv := redistest.StartServerWith(t, redistest.Options{Admin: true})
			admin := srv.Client(t)
			if err := admin.ConfigSet(ctx, "requirepass", password).Err(); err != nil {
				t.Fatal(err)
			}

			env := connEnv(srv.URL(), map[string]string{"REDIS_AUTH_SECRET_ARN": sm.ARN(smRedisARN)})
			rt, logs := idRuntime(t, env, instance.Options{SecretsManager: sm.Client(), SecretRetryInterval: 20 * time.Millisecond})
			decide := func() (apigw.Outcome, error) {
				return rt.Decide(ctx, apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "192.0.2.47"})
			}
			// untilDecided decides until a decision is made on Redis
			// (not degraded), up to a deadline that covers the breaker's
			// cool-down after the failed decisions.
			untilDecided := func(when string) {
				t.Helper()
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					out, err := decide()
					if err == nil && out.Result.Allowed && !out.Result.Degraded {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: decisions still degraded (last: %+v, %v)\n%s", when, out.Result, err, logs)
					}
				}
			}

			out, err := decide()
			if err != nil || !out.Result.Degraded {
				t.Fatalf("before Secrets Manager answers: degraded=%v err=%v; want a degraded decision", out.Result.Degraded, err)
			}
			sm.Answer()
			untilDecided("once Secrets Manager answers")
			if _, err := rt.Decide(ctx, apigw.Request{Method: "POST", Path: "/auth/login", SourceIP: "192.0.2.47"}); err != nil {
				t.Errorf("fail-closed route once the token is read: %v", err)
			}

			// Once read, new connections do not ask AWS: close the
			// runtime's connections and decide again on a new one.
			asked := sm.GetSecretValueCalls()
			if err := admin.Do(ctx, "CLIENT", "KILL", "USER", "default").Err(); err != nil {
				t.Fatalf("CLIENT KILL: %v", err)
			}
			for deadline := time.Now().Add(10 * time.Second); defaultUserConnected(t, admin); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the server still lists the killed connections")
				}
			}
			untilDecided("on a new connection")
			if !defaultUserConnected(t, admin) {
				t.Fatal("no new connection was opened")
			}
			if n := sm.GetSecretValueCalls(); n != asked {
				t.Errorf("Secrets Manager asked %d more times for a new connection, want none: the token is kept", n-asked)
			}

			log := logs.String()
			for _, want := range []string{"read REDIS_AUTH_SECRET_ARN failed", tc.wantLog, `"auth":"secret-pending"`, "new Redis connections authenticate with its token"} {
				if !strings.Contains(log, want) {
					t.Errorf("log does not say %q:\n%s", want, log)
				}
			}
			if strings.Contains(log, password) {
				t.Error("the Redis password reached the log")
			}
		})
	}
}

// defaultUserConnected reports whether the server lists a connection of
// the default user (the runtime's; the harness's own is AdminUser's).
func defaultUserConnected(t *testing.T, admin *redis.Client) bool {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	for line := range strings.Lines(list) {
		if slices.Contains(strings.Fields(line), "user=default") {
			return true
		}
	}
	return false
}
