package instance_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// connLimit is the limit the connection tests decide on: roomy, so every
// decision of a working connection is an Allow.
var connLimit = ratelimit.Limit{Name: "conn", Count: 100, Window: time.Minute, Algorithm: ratelimit.SlidingWindow}

// connTimeout is the Redis budget of the connection tests: generous, since
// they test whom a client trusts, not how fast it is.
const connTimeout = 2 * time.Second

// connDecide makes one decision through a client built by ratelimit.NewClient
// from cc.
func connDecide(t *testing.T, cc redisclient.Config, prefix string) (ratelimit.Result, error) {
	t.Helper()
	client, err := redisclient.New(cc)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: prefix, Timeout: cc.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	return limiter.Decide(context.Background(), 1, ratelimit.Check{Identity: "conn-test", Limit: connLimit})
}

// TestRedisTLS: rediss:// connects with TLS and verifies the server. With
// the test CA trusted, a real decision is made on a single node and on a
// (one-node) cluster; a certificate from a CA the client does not trust,
// or for another host name than the URL's, is refused, so the decision
// fails as Redis unavailable (the failure policy's case), whatever the mode.
func TestRedisTLS(t *testing.T) {
	ca := redistest.NewCA(t, "slidegate test CA")
	unknownCA := redistest.NewCA(t, "a CA nobody trusts")

	good := ca.Issue(t, "localhost", "127.0.0.1")
	single := redistest.StartServerWith(t, redistest.Options{TLS: &good})
	strangerCert := unknownCA.Issue(t, "localhost", "127.0.0.1")
	stranger := redistest.StartServerWith(t, redistest.Options{TLS: &strangerCert})
	otherHostCert := ca.Issue(t, "redis.internal.example")
	otherHost := redistest.StartServerWith(t, redistest.Options{TLS: &otherHostCert})
	// The cluster node's certificate names only localhost, as an
	// ElastiCache node's names only its endpoints.
	clusterCert := ca.Issue(t, "localhost")
	cluster := redistest.StartServerWith(t, redistest.Options{TLS: &clusterCert, Cluster: true})

	url := func(host string, s *redistest.Server) string {
		return "rediss://" + host + ":" + strconv.Itoa(s.Port())
	}
	cases := []struct {
		name    string
		url     string
		cluster bool
		roots   *x509.CertPool
		wantErr string // "" for a successful decision; else part of the TLS error
	}{
		{"single node, trusted CA, DNS name", url("localhost", single), false, ca.Pool(), ""},
		{"single node, trusted CA, IP address", url("127.0.0.1", single), false, ca.Pool(), ""},
		{"single node, certificate of an unknown CA", url("localhost", stranger), false, ca.Pool(), "certificate signed by unknown authority"},
		{"single node, test CA unknown to the system roots", url("localhost", single), false, nil, "certificate signed by unknown authority"},
		{"single node, certificate for another host", url("localhost", otherHost), false, ca.Pool(), "not localhost"},
		{"single node, skip_verify in the URL is ignored", url("localhost", stranger) + "?skip_verify=true", false, ca.Pool(), "certificate signed by unknown authority"},
		{"cluster, trusted CA", url("localhost", cluster), true, ca.Pool(), ""},
		{"cluster, CA not trusted", url("localhost", cluster), true, unknownCA.Pool(), "certificate signed by unknown authority"},
		{"cluster, certificate for another host", url("127.0.0.1", cluster), true, ca.Pool(), "doesn't contain any IP SANs"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := redisclient.Config{URL: tc.url, Cluster: tc.cluster, RootCAs: tc.roots, Timeout: connTimeout}
			res, err := connDecide(t, cc, fmt.Sprintf("tls%d", i))
			if tc.wantErr == "" {
				if err != nil || !res.Allowed {
					t.Fatalf("decision over TLS = %+v, %v; want an Allow", res, err)
				}
				return
			}
			if !errors.Is(err, ratelimit.ErrUnavailable) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("decision = %+v, %v; want ErrUnavailable from a refused certificate (%q)", res, err, tc.wantErr)
			}
		})
	}
}

// TestRedisTLSServerClosedConnection: a pooled TLS connection that the
// server has closed (here CLIENT KILL; in ElastiCache a failover, a node
// replacement, the 12-hour end of an IAM-authenticated connection) is
// noticed before reuse and replaced, so the next decision succeeds instead
// of failing with EOF (commands are never retried).
func TestRedisTLSServerClosedConnection(t *testing.T) {
	ca := redistest.NewCA(t, "reconnect test CA")
	cert := ca.Issue(t, "localhost")
	cases := []struct {
		name    string
		cluster bool
	}{
		{"single node", false},
		{"cluster", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServerWith(t, redistest.Options{TLS: &cert, Cluster: tc.cluster})
			cc := redisclient.Config{URL: "rediss://localhost:" + strconv.Itoa(srv.Port()), Cluster: tc.cluster, RootCAs: ca.Pool(), Timeout: connTimeout}
			client, err := redisclient.New(cc)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Close() })
			dialed := recordDials(client)
			limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "reconnect", Timeout: connTimeout})
			if err != nil {
				t.Fatal(err)
			}
			decide := func(when string) {
				t.Helper()
				res, err := limiter.Decide(context.Background(), 1, ratelimit.Check{Identity: "reconnect", Limit: connLimit})
				if err != nil || !res.Allowed {
					t.Fatalf("decision %s = %+v, %v; want an Allow", when, res, err)
				}
			}
			decide("on a new connection")
			admin := srv.Client(t)
			killed := clientIDs(t, admin, "")
			if len(killed) == 0 || len(dialed.dialed()) == 0 {
				t.Fatal("the client has no connection for the server to close")
			}
			// Every client but the harness's own.
			if err := admin.Do(context.Background(), "CLIENT", "KILL", "TYPE", "normal").Err(); err != nil {
				t.Fatalf("CLIENT KILL: %v", err)
			}
			waitServerClosed(t, admin, killed, dialed)
			decide("after the server closed the connection")
		})
	}
}

// dialRecorder is a go-redis hook that keeps every connection its client
// dials (the net.Conn of the client's Dialer: for TLS, the
// checkableTLSConn that exposes its socket).
type dialRecorder struct {
	mu    sync.Mutex
	conns []net.Conn
}

// recordDials makes r keep the connections client dials from now on, a
// cluster client's node clients' included. Call it before the first
// command.
func recordDials(client redis.UniversalClient) *dialRecorder {
	r := &dialRecorder{}
	if cluster, ok := client.(*redis.ClusterClient); ok {
		cluster.OnNewNode(func(node *redis.Client) { node.AddHook(r) })
	} else {
		client.AddHook(r)
	}
	return r
}

func (r *dialRecorder) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			r.mu.Lock()
			r.conns = append(r.conns, conn)
			r.mu.Unlock()
		}
		return conn, err
	}
}

func (r *dialRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (r *dialRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *dialRecorder) dialed() []net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.conns)
}

// clientIDs are the ids of the connections the server lists, of user (any
// user when ""), the admin client's own excluded.
func clientIDs(t *testing.T, admin *redis.Client, user string) []string {
	t.Helper()
	ctx := context.Background()
	self, err := admin.ClientID(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT ID: %v", err)
	}
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	var ids []string
	for line := range strings.Lines(list) {
		fields := strings.Fields(line)
		if user != "" && !slices.Contains(fields, "user="+user) {
			continue
		}
		for _, field := range fields {
			if id, ok := strings.CutPrefix(field, "id="); ok && id != strconv.FormatInt(self, 10) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// waitServerClosed waits, up to a deadline, until the server lists none
// of the killed connections and every connection the client dialed (when
// dialed is not nil) has the server's close waiting on its socket (end of
// stream, or a TLS alert to read): only then has the close reached the
// client, and what the next decision does with it no longer depends on how
// fast loopback is.
func waitServerClosed(t *testing.T, admin *redis.Client, killed []string, dialed *dialRecorder) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ; ; time.Sleep(time.Millisecond) {
		listed := slices.ContainsFunc(clientIDs(t, admin, ""), func(id string) bool { return slices.Contains(killed, id) })
		pending := false
		if dialed != nil {
			pending = slices.ContainsFunc(dialed.dialed(), func(c net.Conn) bool { return !closeArrived(t, c) })
		}
		if !listed && !pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's close has not reached the client (still listed by the server: %v; a socket with nothing to read: %v)", listed, pending)
		}
	}
}

// closeArrived reports whether the server's close of c has reached its
// socket: something to read (a TLS close_notify alert), end of stream, or
// an error such as a reset. It peeks without blocking and consumes
// nothing, as go-redis's own check before reuse does. A connection the
// client has closed itself counts as arrived: it is not reused.
func closeArrived(t *testing.T, c net.Conn) bool {
	t.Helper()
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS: its TCP connection
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("dialed connection %T has no socket", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatalf("socket of the dialed connection: %v", err)
	}
	arrived := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		arrived = !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK)
		return true
	})
	return arrived || err != nil
}

// TestRedisTLSFromEnvironment: the production path. REDIS_URL=rediss://
// with REDIS_TLS_CA_FILE naming the private CA gives a runtime whose
// decisions are made on Redis; without the CA file, or with one that cannot
// be read (logged, naming the variable), the server is not trusted and
// decisions degrade to the local fallback, never to an unverified
// connection.
func TestRedisTLSFromEnvironment(t *testing.T) {
	ca := redistest.NewCA(t, "slidegate env CA")
	cert := ca.Issue(t, "localhost")
	srv := redistest.StartServerWith(t, redistest.Options{TLS: &cert})
	redisURL := "rediss://localhost:" + strconv.Itoa(srv.Port())

	cases := []struct {
		name         string
		caFile       string
		wantDegraded bool
		wantLog      []string
	}{
		{"CA file trusted", ca.CertFile(), false, []string{`"tls":true`, `"privateCA":true`}},
		{"no CA file", "", true, []string{"certificate signed by unknown authority"}},
		{"unreadable CA file", "/nonexistent/redis-ca.pem", true, []string{"REDIS_TLS_CA_FILE", "/nonexistent/redis-ca.pem", "using the system roots"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := connEnv(redisURL, map[string]string{"REDIS_TLS_CA_FILE": tc.caFile})
			rt, logs := idRuntime(t, env, instance.Options{})
			out, err := rt.Decide(context.Background(), apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "192.0.2.44"})
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if !out.Result.Allowed || out.Result.Degraded != tc.wantDegraded {
				t.Errorf("outcome allowed=%v degraded=%v, want allowed with degraded=%v", out.Result.Allowed, out.Result.Degraded, tc.wantDegraded)
			}
			for _, want := range tc.wantLog {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log does not say %q:\n%s", want, logs)
				}
			}
		})
	}
}

// connEnv is a function's environment for the connection tests: Redis at
// redisURL, known API keys given (so nothing asks API Gateway), then
// overrides; an empty override removes the variable.
func connEnv(redisURL string, overrides map[string]string) map[string]string {
	env := map[string]string{
		"REDIS_URL":      redisURL,
		"REDIS_TIMEOUT":  connTimeout.String(),
		"API_KEY_HASHES": strings.Repeat("ab", 32),
	}
	for k, v := range overrides {
		if v == "" {
			delete(env, k)
		} else {
			env[k] = v
		}
	}
	return env
}
