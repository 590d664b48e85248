package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/redistest"
)

// fakeSecretsManager answers GetSecretValue like Secrets Manager (AWS JSON
// 1.1: POST / with X-Amz-Target), from a map of ARN to SecretString.
type fakeSecretsManager struct {
	secrets map[string]string
	mu      sync.Mutex
	asked   []string
}

func (f *fakeSecretsManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		http.Error(w, `{"__type":"InvalidRequestException","message":"bad request"}`, http.StatusBadRequest)
		return
	}
	var in struct{ SecretId string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, `{"__type":"InvalidRequestException"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.asked = append(f.asked, in.SecretId)
	f.mu.Unlock()
	secret, ok := f.secrets[in.SecretId]
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"ARN": in.SecretId, "Name": "n", "SecretString": secret, "VersionId": "v1"})
}

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
	redisPassword, jwtSecret := azSecret(t), azSecret(t)
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
	sm := &fakeSecretsManager{secrets: map[string]string{redisARN: redisPassword, jwtARN: jwtSecret}}
	api := httptest.NewServer(sm)
	t.Cleanup(api.Close)

	env := azEnv(srv.URL(), "", map[string]string{
		"REDIS_AUTH_SECRET_ARN":            redisARN,
		"JWT_HS256_SECRET_ARN":             jwtARN,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": api.URL,
		"AWS_ACCESS_KEY_ID":                "AKIDEXAMPLETEST",
		"AWS_SECRET_ACCESS_KEY":            "test-secret-not-real",
	})
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
		{"token signed with another key", map[string]string{"Authorization": "Bearer " + azToken(t, azSecret(t), "u1")}, "", true},
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
		})
	}
	if logs := rie.Logs(); strings.Contains(logs, redisPassword) || strings.Contains(logs, jwtSecret) {
		t.Error("a secret reached the log")
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if len(sm.asked) != 2 {
		t.Errorf("Secrets Manager was asked %d times (%v), want once per secret at cold start", len(sm.asked), sm.asked)
	}
}
