package instance_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/iamauth"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// The IAM tests' ElastiCache user id (an ACL user of the local Redis), cache
// and static AWS credentials.
const (
	iamUser      = "slidegate-app"
	iamCache     = "rate-limits"
	iamRegion    = "us-east-1"
	iamAccessKey = "AKIDIAMTESTEXAMPLE"
	iamSecretKey = "iam-test-secret-not-real"
)

// iamServer is a local Redis standing in for ElastiCache with IAM
// authentication: TLS, the default user off, and an ACL user named like an
// ElastiCache user id whose passwords the test sets to the tokens it
// expects.
type iamServer struct {
	srv *redistest.Server
	ca  *redistest.CA
	url string
	// dialed, when set, records the connections of the client under
	// test, whose sockets a kill waits for.
	dialed *dialRecorder
}

func startIAMServer(t *testing.T) *iamServer {
	t.Helper()
	ca := redistest.NewCA(t, "iam test CA")
	cert := ca.Issue(t, "localhost")
	srv := redistest.StartServerWith(t, redistest.Options{TLS: &cert, Admin: true})
	s := &iamServer{srv: srv, ca: ca, url: "rediss://localhost:" + strconv.Itoa(srv.Port())}
	if err := srv.Client(t).Do(context.Background(), "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatalf("lock out the default user: %v", err)
	}
	s.accept(t, true)
	return s
}

// accept makes the ACL user's passwords exactly tokens, and with kill
// closes the user's open connections, and waits until the server has let
// them go and (with s.dialed) the close has reached the client, so that
// the client's next command opens, and authenticates, a new one.
func (s *iamServer) accept(t *testing.T, kill bool, tokens ...string) {
	t.Helper()
	ctx := context.Background()
	admin := s.srv.Client(t)
	args := []any{"ACL", "SETUSER", iamUser, "on", "resetpass", "~*", "+@all"}
	// With no token, no password opens a new connection.
	for _, token := range tokens {
		args = append(args, ">"+token)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", iamUser, err)
	}
	if kill {
		killed := clientIDs(t, admin, iamUser)
		if err := admin.Do(ctx, "CLIENT", "KILL", "USER", iamUser).Err(); err != nil {
			t.Fatalf("CLIENT KILL USER %s: %v", iamUser, err)
		}
		waitServerClosed(t, admin, killed, s.dialed)
	}
}

func iamToken(t *testing.T, cfg iamauth.Config, at time.Time) string {
	t.Helper()
	token, err := iamauth.Token(context.Background(), cfg, aws.Credentials{AccessKeyID: iamAccessKey, SecretAccessKey: iamSecretKey}, at)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestRedisIAMTokenRenewal: a client configured from the environment the
// production way (config.FromEnv, then iamauth's provider through
// Provider.Configure, as the runtime does) authenticates every new
// connection with the token for the clock's time: the cached one while it
// is fresh (up to ReuseUntil), a new one after it expires. A server that
// accepts only a stale token refuses it, so the test fails if the client
// does not renew.
func TestRedisIAMTokenRenewal(t *testing.T) {
	server := startIAMServer(t)
	env := connEnv(server.url, map[string]string{
		"REDIS_TLS_CA_FILE": server.ca.CertFile(),
		"REDIS_IAM_USER":    iamUser,
		"REDIS_CACHE_NAME":  strings.ToUpper(iamCache), // ElastiCache keeps names lower-case
	})
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("configuration: %v", err)
	}
	if !cfg.RedisIAM.Enabled() || cfg.RedisIAM.CacheName != iamCache {
		t.Fatalf("RedisIAM = %+v, want on for cache %s", cfg.RedisIAM, iamCache)
	}
	iamCfg := iamauth.Config{UserID: cfg.RedisIAM.User, CacheName: cfg.RedisIAM.CacheName, Serverless: cfg.RedisIAM.Serverless, Region: iamRegion}

	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := testkit.NewClock(t0)
	provider, err := iamauth.NewProvider(iamCfg, credentials.NewStaticCredentialsProvider(iamAccessKey, iamSecretKey, ""), iamauth.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	cc := provider.Configure(cfg.Redis)
	if cc.ConnMaxLifetime != iamauth.ConnMaxLifetime {
		t.Errorf("ConnMaxLifetime = %v, want %v", cc.ConnMaxLifetime, iamauth.ConnMaxLifetime)
	}
	client, err := redisclient.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	server.dialed = recordDials(client)
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "iam", Timeout: connTimeout})
	if err != nil {
		t.Fatal(err)
	}

	expired := t0.Add(iamauth.TokenLifetime + time.Minute)
	steps := []struct {
		name    string
		at      time.Time   // the clock
		accepts []time.Time // the server accepts the tokens signed at these times
		kill    bool        // close the open connections first
		wantOK  bool
	}{
		{"the token for t0 opens the first connection", t0, []time.Time{t0}, true, true},
		{"nine minutes on, a new connection reuses the cached token", t0.Add(9 * time.Minute), []time.Time{t0}, true, true},
		{"after expiry, a new connection presents a fresh token", expired, []time.Time{expired}, true, true},
		{"a server that knows only the stale token refuses", expired, []time.Time{t0}, true, false},
		{"the fresh token is accepted again", expired, []time.Time{expired}, true, true},
		{"an open connection is not asked again", expired.Add(time.Hour), nil, false, true},
		// Between RefreshAfter and ReuseUntil the kept token is presented
		// at once (a new one is signed in the background), so a slow or
		// failing credential source costs new connections nothing.
		{"twelve minutes after signing, a new connection presents the kept token", expired.Add(12 * time.Minute), []time.Time{expired}, true, true},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			clock.Set(step.at)
			var tokens []string
			for _, at := range step.accepts {
				tokens = append(tokens, iamToken(t, iamCfg, at))
			}
			server.accept(t, step.kill, tokens...)

			res, err := limiter.Decide(context.Background(), 1, ratelimit.Check{Identity: "iam-test", Limit: connLimit})
			if step.wantOK {
				if err != nil || !res.Allowed {
					t.Fatalf("decision = %+v, %v; want an Allow", res, err)
				}
				return
			}
			if !errors.Is(err, ratelimit.ErrUnavailable) || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Fatalf("decision = %+v, %v; want ErrUnavailable from a refused token (WRONGPASS)", res, err)
			}
			for _, at := range []time.Time{t0, expired} {
				if strings.Contains(err.Error(), iamToken(t, iamCfg, at)) {
					t.Error("the error quotes a token")
				}
			}
		})
	}
}

// TestRedisIAMFromEnvironment: the whole production path, instance.NewRuntime
// with credentials and region from the default AWS configuration (here the
// environment, as in Lambda). With REDIS_IAM_USER and REDIS_CACHE_NAME set
// the runtime decides on Redis, does not read REDIS_AUTH_SECRET_ARN (IAM
// wins, with a warning) and never logs a token; without a cache name IAM is
// off, the log says why, and decisions degrade by the failure policy.
func TestRedisIAMFromEnvironment(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", iamAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", iamSecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", iamRegion)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	server := startIAMServer(t)
	iamCfg := iamauth.Config{UserID: iamUser, CacheName: iamCache, Region: iamRegion}
	sm := mototest.NewSecrets(t, map[string]string{smRedisARN: "unused-auth-token"})

	cases := []struct {
		name         string
		env          map[string]string
		wantDegraded bool
		wantLog      []string
	}{
		{
			name: "IAM on",
			env: map[string]string{
				"REDIS_IAM_USER": iamUser, "REDIS_CACHE_NAME": iamCache,
				"REDIS_AUTH_SECRET_ARN": sm.ARN(smRedisARN),
			},
			wantLog: []string{"redis connections authenticate with IAM", "REDIS_IAM_USER and REDIS_AUTH_SECRET_ARN are both set", `"auth":"iam"`},
		},
		{
			name:         "IAM user without a cache name",
			env:          map[string]string{"REDIS_IAM_USER": iamUser},
			wantDegraded: true,
			wantLog:      []string{"REDIS_CACHE_NAME", "required with REDIS_IAM_USER", "IAM authentication is off"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The runtime signs its token when it first connects, at cold
			// start: the server accepts the token of every second around.
			var tokens []string
			for at := time.Now().Truncate(time.Second).Add(-2 * time.Second); at.Before(time.Now().Add(time.Minute)); at = at.Add(time.Second) {
				tokens = append(tokens, iamToken(t, iamCfg, at))
			}
			server.accept(t, true, tokens...)

			env := connEnv(server.url, tc.env)
			env["REDIS_TLS_CA_FILE"] = server.ca.CertFile()
			rt, logs := idRuntime(t, env, instance.Options{SecretsManager: sm.Client()})
			out, err := rt.Decide(context.Background(), apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "192.0.2.45"})
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if !out.Result.Allowed || out.Result.Degraded != tc.wantDegraded {
				t.Errorf("outcome allowed=%v degraded=%v, want allowed with degraded=%v\n%s", out.Result.Allowed, out.Result.Degraded, tc.wantDegraded, logs)
			}
			for _, want := range tc.wantLog {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log does not say %q:\n%s", want, logs)
				}
			}
			for _, token := range tokens {
				if strings.Contains(logs.String(), token) {
					t.Fatal("a token reached the log")
				}
			}
		})
	}
	if n := sm.GetSecretValueCalls(); n != 0 {
		t.Errorf("Secrets Manager was asked %d times, want never: IAM replaces the AUTH secret", n)
	}
}
