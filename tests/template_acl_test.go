package tests

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/config"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
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
	// !If [CacheUserReadsControlsOnly, Redis 7 form, Redis 6 form].
	choice := yamlGet(props, "AccessString")
	if choice == nil || choice.Tag != "!If" || len(choice.Content) != 3 || choice.Content[0].Value != "CacheUserReadsControlsOnly" {
		t.Fatalf("CacheIamUser AccessString: want !If [CacheUserReadsControlsOnly, %%R~ form, Redis 6 form]")
	}
	if d := yamlScalar(yamlGet(yamlGet(yamlGet(tpl.root, "Parameters"), "CacheUserReadOnlyControls"), "Default")); d != "false" {
		t.Errorf("CacheUserReadOnlyControls default %q, want false: only a documented access string by default", d)
	}
	for _, form := range []struct {
		name     string
		access   string
		readOnly bool
	}{
		{"default, Redis 6 ACL rules", yamlScalar(choice.Content[2]), false},
		{"CacheUserReadOnlyControls=true, %R~", yamlScalar(choice.Content[1]), true},
	} {
		t.Run(form.name, func(t *testing.T) {
			if deploy, err := os.ReadFile("../docs/deploy.md"); err != nil || !strings.Contains(string(deploy), "    "+form.access+"\n") {
				t.Errorf("docs/deploy.md does not show the access string %q as the template has it (%v)", form.access, err)
			}
			rules := strings.Fields(form.access)
			controls := "~" + config.DefaultKeyPrefix + ":netcontrols"
			if form.readOnly {
				controls = "%R" + controls
			}
			if !strings.HasPrefix(form.access, "on ") || !containsString(rules, "~"+config.DefaultKeyPrefix+":{*}:*") || !containsString(rules, controls) {
				t.Fatalf("AccessString %q: want an enabled user limited to ~%s:{*}:* and %s", form.access, config.DefaultKeyPrefix, controls)
			}
			// Only Redis 6 ACL rules in the default: no selector, no
			// key permission (%R~, %W~, %RW~), no pub/sub channel rule.
			if !form.readOnly && strings.ContainsAny(form.access, "%()&") {
				t.Errorf("default AccessString %q holds a rule newer than Redis 6's ACL", form.access)
			}
			aclOnEveryTopology(t, "slidegate-fn-test", "CacheIamUser", rules, func(t *testing.T, client redis.UniversalClient) {
				aclDecideEveryAlgorithm(t, client)
				aclRefused(t, client)
				aclControlsReadOnly(t, client, form.readOnly)
			})
		})
	}
}

// aclControlsReadOnly: the functions' user reads the network controls and
// an identity's control key as a controlled decision declares it, and can
// write neither the controls' index nor, when readOnly, the network
// controls.
func aclControlsReadOnly(t *testing.T, client redis.UniversalClient, readOnly bool) {
	t.Helper()
	ctx := context.Background()
	if err := client.HGetAll(ctx, "rl:netcontrols").Err(); err != nil {
		t.Errorf("HGETALL of the network controls through the functions' user: %v", err)
	}
	// A controlled decision's script declares the identity's control key
	// after its limits' keys, in the identity's slot.
	err := client.Eval(ctx, "redis.call('GET', KEYS[2]) return redis.call('INCR', KEYS[1])", []string{"rl:{acltag}:sw:acl:1m", "rl:{acltag}:ctl"}).Err()
	if err != nil {
		t.Errorf("a script declaring a control key, through the functions' user: %v", err)
	}
	// The functions' own decisions, reading controls.
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{Timeout: 2 * time.Second, Controls: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range ratelimit.Algorithms() {
		limit := ratelimit.Limit{Name: "acl-controls", Count: 2, Window: time.Minute, Algorithm: alg}
		if res, err := limiter.Decide(ctx, 1, ratelimit.Check{Identity: "acl-controls-" + string(alg), Limit: limit}); err != nil || !res.Allowed {
			t.Errorf("%s: a decision reading controls through the functions' user: %+v, %v", alg, res, err)
		}
	}
	refused := map[string][]any{
		"write the controls' index": {"ZADD", "rl:controls", "1", "x"},
		"read the controls' index":  {"ZRANGE", "rl:controls", "0", "-1"},
	}
	if readOnly {
		refused["write the network controls"] = []any{"HSET", "rl:netcontrols", "203.0.113.0/24", "v1 e 99999999999999 0 {}"}
	}
	for what, args := range refused {
		if err := client.Do(ctx, args...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s through the functions' user: %v, want a NOPERM refusal", what, err)
		}
	}
}

// TestTemplateOperatorUserAccessString: the operator function's user
// (CacheOperatorUser) sets, lists and lifts controls, identity and network,
// single node and cluster, and touches no counter.
func TestTemplateOperatorUserAccessString(t *testing.T) {
	tpl := tplLoad(t)
	props := yamlGet(yamlGet(yamlGet(tpl.root, "Resources"), "CacheOperatorUser"), "Properties")
	if mode := yamlScalar(yamlGet(yamlGet(props, "AuthenticationMode"), "Type")); mode != "iam" {
		t.Errorf("CacheOperatorUser AuthenticationMode.Type = %q, want iam", mode)
	}
	if id, name := yamlString(yamlGet(props, "UserId")), yamlString(yamlGet(props, "UserName")); id == "" || id != name {
		t.Errorf("CacheOperatorUser: UserId %q and UserName %q must be equal for IAM authentication", id, name)
	}
	access := yamlScalar(yamlGet(props, "AccessString"))
	rules := strings.Fields(access)
	if !strings.HasPrefix(access, "on ") {
		t.Fatalf("CacheOperatorUser AccessString %q: want an enabled user", access)
	}
	check := func(t *testing.T, client redis.UniversalClient) {
		ctx := context.Background()
		l, err := ratelimit.NewLimiter(client, ratelimit.Options{Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		now, err := l.Controls().Time(ctx)
		if err != nil {
			t.Fatalf("TIME through the operator's user: %v", err)
		}
		c := controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "acl test"}
		if err := l.Controls().Set(ctx, "ip:203.0.113.7", c); err != nil {
			t.Fatalf("Store.Set through the operator's user: %v", err)
		}
		if list, err := l.Controls().List(ctx); err != nil || len(list) != 1 {
			t.Fatalf("Store.List through the operator's user: %+v, %v", list, err)
		}
		if _, ok, err := l.Controls().Lift(ctx, "ip:203.0.113.7"); err != nil || !ok {
			t.Fatalf("Store.Lift through the operator's user: %v, %v", ok, err)
		}
		if err := l.Controls().SetNetwork(ctx, netip.MustParsePrefix("203.0.113.0/24"), c); err != nil {
			t.Fatalf("Store.SetNetwork through the operator's user: %v", err)
		}
		if nets, err := l.Controls().Networks(ctx); err != nil || len(nets) != 1 {
			t.Fatalf("NetworkControls through the operator's user: %+v, %v", nets, err)
		}
		if _, err := l.Decide(ctx, 1, ratelimit.Check{Identity: "ip:203.0.113.7", Limit: ratelimit.Limit{Name: "acl", Count: 2, Window: time.Minute}}); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("a decision through the operator's user: %v, want a NOPERM refusal (it touches no counter)", err)
		}
		for what, args := range map[string][]any{
			"a counter":     {"SET", "rl:{acltag}:sw:acl:1m", "1"},
			"a key outside": {"SET", "{acl}other", "1"},
			"FLUSHALL":      {"FLUSHALL"},
			"KEYS":          {"KEYS", "*"},
		} {
			if err := client.Do(ctx, args...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
				t.Errorf("%s through the operator's user: %v, want a NOPERM refusal", what, err)
			}
		}
	}
	aclOnEveryTopology(t, "slidegate-op-test", "CacheOperatorUser", rules, check)
}

// aclOnEveryTopology creates the user name with the access string's rules
// on a single redis-server and on every node of a 3-node cluster, and runs
// check through a client that authenticates as it on each.
func aclOnEveryTopology(t *testing.T, userName, resource string, rules []string, check func(t *testing.T, client redis.UniversalClient)) {
	t.Helper()
	const password = "iam-token-stand-in"
	setUser := func(t *testing.T, admin *redis.Client) {
		t.Helper()
		args := []any{"ACL", "SETUSER", userName, "reset"}
		for _, r := range rules {
			args = append(args, r)
		}
		args = append(args, ">"+password)
		if err := admin.Do(context.Background(), args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER with %s's access string %q: %v", resource, strings.Join(rules, " "), err)
		}
	}
	connect := func(t *testing.T, u string, cluster bool) redis.UniversalClient {
		t.Helper()
		client, err := redisclient.New(redisclient.Config{URL: u, Cluster: cluster, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		t.Cleanup(func() { _ = client.Close() })
		return client
	}
	t.Run("single node", func(t *testing.T) {
		srv := redistest.StartServer(t)
		setUser(t, srv.Client(t))
		check(t, connect(t, fmt.Sprintf("redis://%s:%s@%s", userName, password, srv.Addr()), false))
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
		check(t, connect(t, fmt.Sprintf("redis://%s:%s@%s?%s", userName, password, addrs[0], q.Encode()), true))
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
