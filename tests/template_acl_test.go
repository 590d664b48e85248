package tests

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestTemplateIamUserAccessString: the access string of the cache user the
// functions connect as under IAM authentication (CacheIamUser) is applied,
// word for word, to a real Redis user, single node and cluster. Through it
// every algorithm loads its script and decides (allowed, then denied), and
// nothing outside slidegate's needs is allowed: other keys, FLUSHALL, KEYS,
// CONFIG, INFO, FUNCTION, and scripts touching other keys are refused.
func TestTemplateIamUserAccessString(t *testing.T) {
	tpl := tplLoad(t)
	user := yamlGet(yamlGet(tpl.root, "Resources"), "CacheIamUser")
	if user == nil {
		t.Fatalf("Resources.CacheIamUser missing")
	}
	props := yamlGet(user, "Properties")
	if mode := yamlScalar(yamlGet(yamlGet(props, "AuthenticationMode"), "Type")); mode != "iam" {
		t.Errorf("CacheIamUser AuthenticationMode.Type = %q, want iam", mode)
	}
	if id, name := yamlString(yamlGet(props, "UserId")), yamlString(yamlGet(props, "UserName")); id == "" || id != name {
		t.Errorf("CacheIamUser: UserId %q and UserName %q must be equal for IAM authentication", id, name)
	}
	access := yamlScalar(yamlGet(props, "AccessString"))
	if access == "" {
		t.Fatalf("CacheIamUser AccessString missing")
	}
	rules := strings.Fields(access)
	if !strings.HasPrefix(access, "on ") || !containsString(rules, "~"+config.DefaultKeyPrefix+":*") {
		t.Fatalf("AccessString %q: want an enabled user limited to ~%s:*", access, config.DefaultKeyPrefix)
	}

	const userName, password = "slidegate-fn-test", "iam-token-stand-in"
	setUser := func(t *testing.T, admin *redis.Client) {
		t.Helper()
		args := []any{"ACL", "SETUSER", userName, "reset"}
		for _, r := range rules {
			args = append(args, r)
		}
		args = append(args, ">"+password)
		if err := admin.Do(context.Background(), args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER with the template's access string %q: %v", access, err)
		}
	}

	t.Run("single node", func(t *testing.T) {
		srv := redistest.StartServer(t)
		setUser(t, srv.Client(t))
		u := fmt.Sprintf("redis://%s:%s@%s", userName, password, srv.Addr())
		client, err := ratelimit.NewClient(ratelimit.ClientConfig{URL: u, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		t.Cleanup(func() { _ = client.Close() })
		aclDecideEveryAlgorithm(t, client)
		aclRefused(t, client)
	})

	t.Run("cluster", func(t *testing.T) {
		cluster := redistest.StartCluster(t, 3, 0)
		addrs := cluster.Addrs()
		for _, addr := range addrs {
			admin := redis.NewClient(&redis.Options{Addr: addr})
			setUser(t, admin)
			_ = admin.Close()
		}
		q := url.Values{}
		for _, a := range addrs[1:] {
			q.Add("addr", a)
		}
		u := fmt.Sprintf("redis://%s:%s@%s?%s", userName, password, addrs[0], q.Encode())
		client, err := ratelimit.NewClient(ratelimit.ClientConfig{URL: u, Cluster: true, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		t.Cleanup(func() { _ = client.Close() })
		aclDecideEveryAlgorithm(t, client)
		aclRefused(t, client)
	})
}

// aclDecideEveryAlgorithm loads the scripts and decides with every
// algorithm until a denial, through client.
func aclDecideEveryAlgorithm(t *testing.T, client redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("NewLimiter: %v", err)
	}
	if err := limiter.LoadScripts(ctx); err != nil {
		t.Fatalf("LoadScripts through the IAM user: %v", err)
	}
	for _, alg := range ratelimit.Algorithms() {
		limit := ratelimit.Limit{Name: "acl", Count: 2, Window: time.Minute, Algorithm: alg}
		for i := range limit.Burst() + 1 {
			want := i < limit.Burst()
			res, err := limiter.Decide(ctx, 1, ratelimit.Check{Identity: "acl-" + string(alg), Limit: limit})
			if err != nil {
				t.Fatalf("%s: decision %d through the IAM user: %v", alg, i+1, err)
			}
			if res.Allowed != want {
				t.Errorf("%s: decision %d allowed=%v, want %v", alg, i+1, res.Allowed, want)
			}
		}
	}
}

// aclRefused sends what the functions' user must not be able to do.
func aclRefused(t *testing.T, client redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	refused := []struct {
		what string
		args []any
	}{
		{"a key outside the prefix", []any{"SET", "{acl}other", "1"}},
		{"FLUSHALL", []any{"FLUSHALL"}},
		{"KEYS", []any{"KEYS", "*"}},
		{"CONFIG GET", []any{"CONFIG", "GET", "maxmemory"}},
		{"INFO", []any{"INFO"}},
		{"FUNCTION LIST", []any{"FUNCTION", "LIST"}},
		{"a script touching another key", []any{"EVAL", "return redis.call('GET', KEYS[1])", "1", "{acl}other"}},
	}
	for _, r := range refused {
		err := client.Do(ctx, r.args...).Err()
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s: got %v, want a NOPERM refusal", r.what, err)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
