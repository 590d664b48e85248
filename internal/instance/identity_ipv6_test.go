package instance_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/identity"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// ipv6Env is an in-process runtime's environment on redisURL: API keys
// from API_KEY_HASHES, so that no AWS call is made, and a Redis budget of
// 2s: these tests count callers, and a loaded machine must not turn a
// decision into a degraded one.
func ipv6Env(redisURL string, overrides map[string]string) map[string]string {
	env := map[string]string{"REDIS_URL": redisURL, "API_KEY_HASHES": identity.KeyHash("unused-test-key"), "REDIS_TIMEOUT": "2s"}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// TestAnonymousIdentityOfSourceAddresses: through the real decision path on
// a real Redis, with the anonymous limit at 30/1m, 60 requests spread over
// a set of source addresses are admitted as many times as the addresses
// make distinct callers: the addresses of one IPv6 /64 are one caller, an
// IPv4-mapped IPv6 address is its IPv4 address, every source address that
// does not parse is one shared caller, and RATE_LIMIT_IPV6_PREFIX (or the
// stage variable rateLimitIpv6Prefix) of 128 counts each address alone.
// Each case also counts the Redis keys it wrote: one per caller.
func TestAnonymousIdentityOfSourceAddresses(t *testing.T) {
	for _, top := range ipv6Topologies(t) {
		t.Run(top.name, func(t *testing.T) { testAnonymousIdentityOfSourceAddresses(t, top) })
	}
}

// ipv6Topology is a Redis the source-address tests run on: its environment
// (REDIS_URL, REDIS_CLUSTER), and a way to empty it and count its keys.
type ipv6Topology struct {
	name     string
	env      map[string]string
	flush    func(ctx context.Context) error
	keyCount func(ctx context.Context) (int64, error)
}

// ipv6Topologies starts a single node and a 3-master cluster.
func ipv6Topologies(t *testing.T) []ipv6Topology {
	single := redistest.StartServer(t)
	singleAdmin := single.Client(t)
	cluster := redistest.StartCluster(t, 3, 0)
	clusterAdmin := cluster.Client(t)
	return []ipv6Topology{
		{
			name:     "single",
			env:      map[string]string{"REDIS_URL": single.URL()},
			flush:    func(ctx context.Context) error { return singleAdmin.FlushAll(ctx).Err() },
			keyCount: func(ctx context.Context) (int64, error) { return singleAdmin.DBSize(ctx).Result() },
		},
		{
			name: "cluster",
			env:  map[string]string{"REDIS_URL": "redis://" + cluster.Addrs()[0], "REDIS_CLUSTER": "true"},
			flush: func(ctx context.Context) error {
				return clusterAdmin.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() })
			},
			keyCount: func(ctx context.Context) (int64, error) {
				var mu sync.Mutex
				var n int64
				err := clusterAdmin.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
					k, err := c.DBSize(ctx).Result()
					mu.Lock()
					n += k
					mu.Unlock()
					return err
				})
				return n, err
			},
		},
	}
}

func testAnonymousIdentityOfSourceAddresses(t *testing.T, top ipv6Topology) {
	cases := []struct {
		name      string
		env       map[string]string
		stageVars map[string]string
		requests  int
		ip        func(i int) string
		admitted  int
		keys      int64
	}{
		{"20 addresses of one /64: one bucket", nil, nil, 60,
			func(i int) string { return fmt.Sprintf("2001:db8:aa:1:%x::%x", i%20, i%20+1) }, 30, 1},
		{"one address written 3 ways (compressed, zero-padded, upper case, with a zone): one bucket", nil, nil, 60,
			func(i int) string {
				return []string{"2001:db8:aa:2::1", "2001:0DB8:00aa:0002:0:0:0:1", "2001:db8:aa:2::1%eth0"}[i%3]
			}, 30, 1},
		{"20 addresses in 20 different /64s: 20 buckets", nil, nil, 60,
			func(i int) string { return fmt.Sprintf("2001:db8:bb:%x::1", i%20) }, 60, 20},
		{"20 /64s of one 6to4 /48 (one IPv4 address's): one bucket", nil, nil, 60,
			func(i int) string { return fmt.Sprintf("2002:cb00:7107:%x::1", i%20) }, 30, 1},
		{"::ffff:203.0.113.7 and 203.0.113.7: one bucket", nil, nil, 60,
			func(i int) string { return []string{"203.0.113.7", "::ffff:203.0.113.7", "::FFFF:cb00:7107"}[i%3] }, 30, 1},
		{"100 source addresses that do not parse: one shared bucket", nil, nil, 100,
			func(i int) string {
				return []string{fmt.Sprintf("garbage-%d", i), fmt.Sprintf("203.0.113.%d.1", i), "", "test-invoke-source-ip", fmt.Sprintf("2001:db8::%d::1", i)}[i%5]
			}, 30, 1},
		{"RATE_LIMIT_IPV6_PREFIX=128: 20 addresses of one /64 are 20 buckets", map[string]string{"RATE_LIMIT_IPV6_PREFIX": "128"}, nil, 60,
			func(i int) string { return fmt.Sprintf("2001:db8:cc:1::%x", i%20+1) }, 60, 20},
		{"RATE_LIMIT_IPV6_PREFIX=48: 20 /64s of one /48 are one bucket", map[string]string{"RATE_LIMIT_IPV6_PREFIX": "48"}, nil, 60,
			func(i int) string { return fmt.Sprintf("2001:db8:dd:%x::1", i%20) }, 30, 1},
		{"stage variable rateLimitIpv6Prefix=128 over the default", nil, map[string]string{"rateLimitIpv6Prefix": "128"}, 60,
			func(i int) string { return fmt.Sprintf("2001:db8:ee:1::%x", i%20+1) }, 60, 20},
		{"RATE_LIMIT_IPV6_PREFIX=200 is refused: the default /64", map[string]string{"RATE_LIMIT_IPV6_PREFIX": "200"}, nil, 60,
			func(i int) string { return fmt.Sprintf("2001:db8:ff:1::%x", i%20+1) }, 30, 1},
		{"a bad stage variable is refused: the environment's /64", nil, map[string]string{"rateLimitIpv6Prefix": "/8"}, 60,
			func(i int) string { return fmt.Sprintf("2001:db8:ff:2::%x", i%20+1) }, 30, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if err := top.flush(ctx); err != nil {
				t.Fatal(err)
			}
			env := ipv6Env(top.env["REDIS_URL"], map[string]string{"RATE_LIMIT_ANONYMOUS": "30/1m"})
			for k, v := range top.env {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			rt, _ := idRuntime(t, env, instance.Options{})
			admitted := 0
			for i := range tc.requests {
				out, err := rt.Decide(ctx, apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: tc.ip(i), StageVariables: tc.stageVars})
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if out.Result.Degraded {
					t.Fatalf("request %d degraded: %v", i, out.Result.Cause)
				}
				if out.Result.Allowed {
					admitted++
				}
			}
			keys, err := top.keyCount(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d of %d admitted, %d Redis keys", admitted, tc.requests, keys)
			if admitted != tc.admitted || keys != tc.keys {
				t.Errorf("admitted %d of %d with %d Redis keys; want %d admitted, %d keys", admitted, tc.requests, keys, tc.admitted, tc.keys)
			}
		})
	}
}

// TestBadIPv6PrefixIsReported: a RATE_LIMIT_IPV6_PREFIX or
// rateLimitIpv6Prefix outside 32..128 is logged with its name, the value
// and the default used instead.
func TestBadIPv6PrefixIsReported(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, v := range []string{"200", "31", "sixty-four", "64.5", "-64"} {
		t.Run(v, func(t *testing.T) {
			rt, logs := idRuntime(t, ipv6Env(srv.URL(), map[string]string{"RATE_LIMIT_IPV6_PREFIX": v}), instance.Options{})
			want := fmt.Sprintf(`RATE_LIMIT_IPV6_PREFIX=%q: want a prefix length in bits from 32 to 128, like 64; using 64`, v)
			if !strings.Contains(strings.ReplaceAll(logs.String(), `\"`, `"`), want) {
				t.Errorf("log lacks %s:\n%s", want, logs)
			}
			if _, err := rt.Decide(context.Background(), apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "2001:db8::1",
				StageVariables: map[string]string{"rateLimitIpv6Prefix": v}}); err != nil {
				t.Fatal(err)
			}
			want = fmt.Sprintf(`stage variable rateLimitIpv6Prefix=%q: want a prefix length in bits from 32 to 128, like 64; using 64`, v)
			if !strings.Contains(strings.ReplaceAll(logs.String(), `\"`, `"`), want) {
				t.Errorf("log lacks %s:\n%s", want, logs)
			}
		})
	}
}

// TestInvalidSourceIsLogged: a source address that does not parse is
// logged (quoted, clipped) and counted as "ip:invalid".
func TestInvalidSourceIsLogged(t *testing.T) {
	srv := redistest.StartServer(t)
	rt, logs := idRuntime(t, ipv6Env(srv.URL(), nil), instance.Options{})
	out, err := rt.Decide(context.Background(), apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "test-invoke-source-ip"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Caller.Identity != "ip:invalid" {
		t.Errorf("identity %q, want ip:invalid", out.Caller.Identity)
	}
	if !strings.Contains(logs.String(), `"sourceIp":"test-invoke-source-ip"`) || !strings.Contains(logs.String(), "not an IP address") {
		t.Errorf("no log line for the invalid source address:\n%s", logs)
	}
}
