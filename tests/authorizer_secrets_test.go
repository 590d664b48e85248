package tests

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/mototest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestAuthorizerSecretsFromSecretsManager: the Redis AUTH token
// (REDIS_AUTH_SECRET_ARN) and the HS256 key (JWT_HS256_SECRET_ARN) are read
// at cold start through the real aws-sdk-go-v2 client, pointed at a local
// endpoint: Redis with requirepass decides (no degraded answers), and a
// token signed with the stored key verifies.
func TestAuthorizerSecretsFromSecretsManager(t *testing.T) {
	const (
		redisARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:redis-auth-AbCdEf"
		jwtARN   = "arn:aws:secretsmanager:us-east-1:123456789012:secret:jwt-hs256-GhIjKl"
	)
	redisPassword, jwtSecret := testkit.RandomSecret(t), testkit.RandomSecret(t)
	srv := redistest.StartServer(t)
	// Set after start: the harness's readiness probe does not AUTH.
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", redisPassword).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the harness stops the server, which does not AUTH either
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: redisPassword})
		defer c.Close()
		_ = c.ConfigSet(context.Background(), "requirepass", "").Err()
	})
	sm := mototest.NewSecrets(t, map[string]string{redisARN: redisPassword, jwtARN: jwtSecret, hkARN: hkKeyA})

	env := azEnv(srv.URL(), "", withEnv(sm.Env(), map[string]string{
		"REDIS_AUTH_SECRET_ARN":          sm.ARN(redisARN),
		"JWT_HS256_SECRET_ARN":           sm.ARN(jwtARN),
		"RATE_LIMIT_HASH_KEY_SECRET_ARN": sm.ARN(hkARN),
	}))
	delete(env, "JWT_HS256_SECRET")
	rie := azStart(t, env)

	cases := []struct {
		name     string
		headers  map[string]string
		wantTier string
		unauth   bool
	}{
		{"anonymous, decided by the password-protected Redis", nil, "anonymous", false},
		{"token signed with the stored key", map[string]string{"Authorization": "Bearer " + azToken(t, jwtSecret, "u1")}, "user", false},
		{"token signed with another key", map[string]string{"Authorization": "Bearer " + azToken(t, testkit.RandomSecret(t), "u1")}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: "192.0.2.30", headers: tc.headers}))
			if a.unauthorized != tc.unauth {
				t.Fatalf("unauthorized = %v, want %v: %+v", a.unauthorized, tc.unauth, a)
			}
			if tc.unauth {
				return
			}
			if !a.allowed() || a.resp.Context["tier"] != tc.wantTier || a.resp.Context["degraded"] != nil {
				t.Errorf("want a non-degraded Allow for %s, got %+v", tc.wantTier, a)
			}
			if tc.wantTier == "anonymous" {
				// The identity is hashed with the key of the hash key secret.
				if want := "anonymous:" + hex.EncodeToString(testkit.IdentityDigest(hkKeyA, "ip:192.0.2.30")); a.resp.PrincipalID != want {
					t.Errorf("principalId %q, want %q (keyed with the secret's key)", a.resp.PrincipalID, want)
				}
			}
		})
	}
	if logs := rie.FinalLogs(); strings.Contains(logs, redisPassword) || strings.Contains(logs, jwtSecret) || strings.Contains(logs, hkKeyA) {
		t.Error("a secret reached the log")
	}
	if n := sm.GetSecretValueCalls(); n != 3 {
		t.Errorf("Secrets Manager was asked %d times, want once per secret at cold start", n)
	}
}

// TestAuthorizerShortHS256SecretFromSecretsManager: an HS256 secret read
// from Secrets Manager (JWT_HS256_SECRET_ARN) that is shorter than 32 bytes
// is refused with a clear error in the log (which never quotes it), and
// HS256 tokens, even signed with it, are then Unauthorized rather than
// earning the user tier.
func TestAuthorizerShortHS256SecretFromSecretsManager(t *testing.T) {
	const jwtARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:jwt-hs256-short-MnOpQr"
	weak := testkit.RandomSecret(t)[:20]
	srv := redistest.StartServer(t)
	sm := mototest.NewSecrets(t, map[string]string{jwtARN: weak})
	env := azEnv(srv.URL(), "", withEnv(sm.Env(), map[string]string{"JWT_HS256_SECRET_ARN": sm.ARN(jwtARN)}))
	delete(env, "JWT_HS256_SECRET")
	rie := azStart(t, env)

	a := azInvoke(t, rie, azRESTEvent(t, azRequest{ip: "192.0.2.31", headers: map[string]string{"Authorization": "Bearer " + azToken(t, weak, "u1")}}))
	if !a.unauthorized {
		t.Fatalf("a token signed with the 20-byte secret: %+v, want Unauthorized", a)
	}
	// The refusal is logged by the cold-start load that refused the secret,
	// which can end after the answer it released: wait for the line, then
	// read the whole log for the secret.
	logs := rie.WaitLogsContaining("JWT_HS256_SECRET_ARN: secret refused", "HS256 secret of 20 bytes refused: at least 32 bytes are required")
	if !strings.Contains(logs, "JWT_HS256_SECRET_ARN: secret refused") || !strings.Contains(logs, "HS256 secret of 20 bytes refused: at least 32 bytes are required") {
		t.Errorf("no clear error for the short secret in the log:\n%s", logs)
	}
	if strings.Contains(rie.FinalLogs(), weak) {
		t.Error("the secret reached the log")
	}
}
