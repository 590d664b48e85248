//go:build !noxray && !otel

package tracing_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/internal/tracing"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// scriptCall is one script command a hook saw, after it ran.
type scriptCall struct {
	command string
	err     error
}

// scriptCallRecorder is a go-redis hook that records the script commands
// (EVALSHA, EVAL) it sees, alone or in pipelines.
type scriptCallRecorder struct {
	mu    sync.Mutex
	calls []scriptCall
}

func (r *scriptCallRecorder) record(cmd redis.Cmder) {
	name := strings.ToUpper(cmd.Name())
	if name != "EVALSHA" && name != "EVAL" {
		return
	}
	r.mu.Lock()
	r.calls = append(r.calls, scriptCall{command: name, err: cmd.Err()})
	r.mu.Unlock()
}

func (r *scriptCallRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *scriptCallRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil {
			cmd.SetErr(err)
		}
		r.record(cmd)
		return err
	}
}

func (r *scriptCallRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			r.record(cmd)
		}
		return err
	}
}

// take returns the calls recorded so far and forgets them.
func (r *scriptCallRecorder) take() []scriptCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := r.calls
	r.calls = nil
	return calls
}

// TestClusterCallIsOneSubsegmentEvenWhenRedirected decides on a real
// Redis Cluster, before and after a failover that leaves the client's slot
// map stale: the call after it visits two nodes (the old master answers
// MOVED), and is still one subsegment.
func TestClusterCallIsOneSubsegmentEvenWhenRedirected(t *testing.T) {
	daemon := startDaemon(t)
	logs := configure(t, daemon.addr)
	cluster := redistest.StartCluster(t, 1, 1)
	addrs := cluster.Addrs()
	client := newClient(t, redisclient.Config{URL: "redis://" + addrs[0] + "?addr=" + addrs[1], Cluster: true})

	// Ground truth: the script calls made on the cluster client, and the
	// round trips its node clients made for them.
	nodeTrips := &scriptCallRecorder{}
	client.(*redis.ClusterClient).OnNewNode(func(node *redis.Client) { node.AddHook(nodeTrips) })
	tracing.Instrument(client)
	calls := &scriptCallRecorder{}
	client.AddHook(calls) // after Instrument: inside the subsegment of each call

	limiter := newLimiter(t, client)
	if err := limiter.LoadScripts(context.Background()); err != nil {
		t.Fatal(err)
	}
	masters := cluster.MasterAddrs(context.Background())
	if len(masters) != 1 {
		t.Fatalf("cluster masters = %v, want one", masters)
	}
	check := ratelimit.Check{Identity: identity, Limit: ratelimit.Limit{Name: "org", Count: 100, Window: time.Minute}}

	steps := []struct {
		name         string
		before       func(t *testing.T)
		wantRedirect bool
	}{
		{name: "decision on a fresh slot map", wantRedirect: false},
		{name: "decision after a failover, through a MOVED redirection", before: func(t *testing.T) { cluster.Failover(t, masters[0]) }, wantRedirect: true},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			calls.take()
			nodeTrips.take()
			tr := newLambdaTrace()
			if _, err := limiter.Decide(tracing.WithTier(tr.ctx, "org"), 1, check); err != nil {
				t.Fatal(err)
			}
			tr.flush()
			docs := daemon.receiveUntil(t, tr.isLast)

			made, trips := calls.take(), nodeTrips.take()
			if len(made) == 0 {
				t.Fatal("the cluster client made no script call")
			}
			var want []wantCall
			for _, c := range made {
				switch {
				case c.err == nil:
					want = append(want, wantCall{command: c.command, outcome: "allowed", tier: "org"})
				case redis.HasErrorPrefix(c.err, "NOSCRIPT"):
					want = append(want, wantCall{command: c.command, outcome: "error", tier: "org", err: true})
				default:
					t.Fatalf("script call %s failed: %v", c.command, c.err)
				}
			}
			checkCalls(t, tr, docs, want)
			if redirected := len(trips) > len(made); redirected != s.wantRedirect {
				t.Errorf("%d calls took %d node round trips %v; want a redirection: %v", len(made), len(trips), trips, s.wantRedirect)
			}
			if logged := logs.take(slog.LevelInfo); len(logged) > 0 {
				t.Errorf("the SDK logged above debug level: %q", logged)
			}
		})
	}
}
