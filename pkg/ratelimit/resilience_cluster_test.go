package ratelimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/testkit/faultproxy"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// clusterURL is the REDIS_URL of a cluster: the first node, the others as
// addr= seeds.
func clusterURL(addrs []string) string {
	var b strings.Builder
	b.WriteString("redis://" + addrs[0])
	for i, a := range addrs[1:] {
		if i == 0 {
			b.WriteString("?")
		} else {
			b.WriteString("&")
		}
		b.WriteString("addr=" + a)
	}
	return b.String()
}

// settleLimit bounds each wait for a load to meet a change of topology.
// It is long only for a loaded machine: the waits poll, and return as soon
// as the load has made its decisions.
const settleLimit = 10 * time.Second

// steadyLoad runs decisions from several workers, over many identities and
// thus every shard, until stop is called.
type steadyLoad struct {
	log  decisionLog
	stop func()
}

func startLoad(gate *ratelimit.Gate, workers int, policy ratelimit.FailurePolicy, checks func(r *rand.Rand) ratelimit.Check) *steadyLoad {
	l := &steadyLoad{}
	var done atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			for !done.Load() {
				_, _ = l.log.decide(gate, policy, checks(r))
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	l.stop = func() { done.Store(true); wg.Wait() }
	return l
}

// manyIdentities spreads decisions over 500 identities with a limit they
// never reach.
func manyIdentities(r *rand.Rand) ratelimit.Check {
	return ratelimit.Check{
		Identity: fmt.Sprintf("203.0.113.%d/%d", r.IntN(250), r.IntN(2)),
		Limit:    ratelimit.Limit{Name: "org", Count: ratelimit.MaxCount, Window: 15 * time.Minute},
	}
}

// TestClusterTopologyChangesUnderLoad moves a slot holding a live counter to
// another master (MOVED and ASK under load), then fails a master over, both
// while decisions run, through the production client and Gate. During the
// reshard, fail-closed decisions must all succeed and the counter must move
// with its slot; during the failover, fail-open decisions must return no
// error, within the budget, and the degraded ones are counted and reported.
func TestClusterTopologyChangesUnderLoad(t *testing.T) {
	cluster := redistest.StartCluster(t, 3, 1)
	client := productionClient(t, clusterURL(cluster.Addrs()), true)
	gate := productionGate(t, client, "topo", ratelimit.GateOptions{})
	ctx := context.Background()

	t.Run("reshard", func(t *testing.T) {
		// Fail-closed, with a budget no redirection needs: any MOVED or
		// ASK not followed is an error here, not a quiet fallback.
		client := clientWithBudget(t, clusterURL(cluster.Addrs()), true, generousBudget)
		gate := productionGateWithin(t, client, "topo", generousBudget, ratelimit.GateOptions{})
		limit := ratelimit.Limit{Name: "user", Count: ratelimit.MaxCount, Window: 15 * time.Minute}
		mover := ratelimit.Check{Identity: "user-that-moves", Limit: limit}
		var moverAllowed atomic.Int64
		decideMover := func(log *decisionLog) {
			if res, err := log.decide(gate, ratelimit.FailClosed, mover); err == nil && res.Allowed {
				moverAllowed.Add(1)
			}
		}
		var warm decisionLog
		decideMover(&warm)

		key, source := findKey(t, cluster, "topo:*")
		admin := redis.NewClient(&redis.Options{Addr: source})
		defer admin.Close()
		slot, err := admin.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		target := otherMaster(t, cluster, source)
		t.Logf("moving slot %d (key %s) from %s to %s", slot, key, source, target)

		load := startLoad(gate, 3, ratelimit.FailClosed, manyIdentities)
		var moverLog decisionLog
		var moverDone atomic.Bool
		var moverWG sync.WaitGroup
		moverWG.Add(1)
		go func() {
			defer moverWG.Done()
			for !moverDone.Load() {
				decideMover(&moverLog)
				time.Sleep(time.Millisecond)
			}
		}()

		// Each step of the move stands until the mover has met it: the
		// slot MIGRATING, then ASK once its keys have moved, then MOVED.
		meet := func() {
			if !moverLog.settle(moverLog.counted(), 50, settleLimit) {
				t.Logf("the mover made no 50 decisions in a row on Redis within %v", settleLimit)
			}
		}
		migrateSlot(t, cluster, slot, source, target, meet)
		meet()
		if !load.log.settle(load.log.counted(), 50, settleLimit) {
			t.Logf("the load made no 50 decisions in a row on Redis within %v of the move", settleLimit)
		}
		moverDone.Store(true)
		moverWG.Wait()
		load.stop()

		for _, l := range []*decisionLog{&load.log, &moverLog} {
			for _, err := range l.errs {
				t.Errorf("decision error during the reshard: %v", err)
			}
		}
		t.Logf("reshard: %d fail-closed decisions on the moving slot, %d elsewhere, %d errors",
			moverLog.count, load.log.count, len(moverLog.errs)+len(load.log.errs))
		res, err := gate.Peek(ctx, 1, mover)
		if err != nil || res.Degraded {
			t.Fatalf("peek after the reshard: degraded=%v err=%v", res.Degraded, err)
		}
		if got, want := res.Decisions[0].Remaining, limit.Count-moverAllowed.Load(); got != want {
			t.Errorf("after the reshard the counter shows %d remaining, want %d: it did not move with its slot", got, want)
		}
	})

	t.Run("planned failover", func(t *testing.T) {
		masters := cluster.MasterAddrs(ctx)
		load := startLoad(gate, 4, ratelimit.FailOpen, manyIdentities)
		load.log.settle(0, 100, settleLimit)
		cluster.Failover(t, masters[len(masters)-1])
		// Keep the load on until it has met the new master and decided on
		// Redis for a while.
		if !load.log.settle(load.log.counted(), 300, settleLimit) {
			t.Logf("no 300 decisions in a row on Redis within %v of the failover", settleLimit)
		}
		load.stop()
		for _, err := range load.log.errs {
			t.Errorf("decision error during a planned failover: %v", err)
		}
		t.Logf("planned failover: %d decisions, %d degraded over %v, %d errors",
			load.log.count, load.log.degraded, load.log.degradedFor().Round(time.Millisecond), len(load.log.errs))
		load.log.checkWithinBudget(t, "planned failover")
	})

	t.Run("master killed and failed over", func(t *testing.T) {
		masters := cluster.MasterAddrs(ctx)
		victim := masters[0]
		load := startLoad(gate, 4, ratelimit.FailOpen, manyIdentities)
		load.log.settle(0, 100, settleLimit)
		killedAt := time.Now()
		cluster.Node(victim).Kill()
		// Let the cluster notice on its own (node timeout 2 s) and promote
		// the replica, as ElastiCache's automatic failover would, for up to
		// 3 s; Failover then only confirms, or forces it if the election
		// has not happened.
		ownFailover := cluster.AwaitOwnFailover(ctx, victim, 3*time.Second)
		cluster.Failover(t, victim)
		promoted := time.Since(killedAt)
		t.Logf("the cluster replaced the killed master by itself: %v", ownFailover)
		// Keep the load on until decisions have been on Redis again for a
		// while.
		if !load.log.settle(load.log.counted(), 500, settleLimit) {
			t.Logf("no 500 decisions in a row on Redis within %v of the failover", settleLimit)
		}
		load.stop()

		for _, err := range load.log.errs {
			t.Errorf("decision error during the failover: %v", err)
		}
		t.Logf("failover: cluster settled %v after the kill; %d decisions, %d degraded over %v, %d errors, slowest %v",
			promoted.Round(time.Millisecond), load.log.count, load.log.degraded, load.log.degradedFor().Round(time.Millisecond),
			len(load.log.errs), load.log.slowest.Round(time.Millisecond))
		load.log.checkWithinBudget(t, "failover")

		// Every shard answers on Redis again.
		deadline := time.Now().Add(10 * time.Second)
		r := rand.New(rand.NewPCG(7, 7))
		for ok := 0; ok < 60; {
			res, err := gate.Decide(ctx, 1, ratelimit.FailOpen, manyIdentities(r))
			switch {
			case err != nil:
				t.Fatalf("decision after the failover: %v", err)
			case res.Degraded:
				ok = 0
				if time.Now().After(deadline) {
					t.Fatalf("decisions still degraded 10s after the failover settled (cause: %v)", res.Cause)
				}
				time.Sleep(20 * time.Millisecond)
			default:
				ok++
			}
		}
	})
}

// findKey returns a key matching pattern and the master that holds it.
func findKey(t *testing.T, cluster *redistest.Cluster, pattern string) (key, master string) {
	t.Helper()
	ctx := context.Background()
	for _, addr := range cluster.MasterAddrs(ctx) {
		c := redis.NewClient(&redis.Options{Addr: addr})
		keys, err := c.Keys(ctx, pattern).Result()
		c.Close()
		if err == nil && len(keys) > 0 {
			return keys[0], addr
		}
	}
	t.Fatalf("no key matches %s on any master", pattern)
	return "", ""
}

// otherMaster returns a master other than addr.
func otherMaster(t *testing.T, cluster *redistest.Cluster, addr string) string {
	t.Helper()
	for _, m := range cluster.MasterAddrs(context.Background()) {
		if m != addr {
			return m
		}
	}
	t.Fatal("the cluster has a single master")
	return ""
}

// migrateSlot moves slot from source to target the way redis-cli
// --cluster reshard does: IMPORTING on the target, MIGRATING on the
// source, MIGRATE of every key, then NODE on every master. Between the
// steps it calls pause, which returns once the load has met the step (ASK,
// then MOVED).
func migrateSlot(t *testing.T, cluster *redistest.Cluster, slot int64, source, target string, pause func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src := redis.NewClient(&redis.Options{Addr: source})
	defer src.Close()
	dst := redis.NewClient(&redis.Options{Addr: target})
	defer dst.Close()
	srcID, err := src.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("CLUSTER MYID on %s: %v", source, err)
	}
	dstID, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("CLUSTER MYID on %s: %v", target, err)
	}
	must := func(c *redis.Client, args ...any) {
		t.Helper()
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, c.Options().Addr, err)
		}
	}
	must(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	must(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	pause()
	host, port, _ := net.SplitHostPort(target)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		if err != nil {
			t.Fatalf("CLUSTER GETKEYSINSLOT: %v", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src, args...)
		pause() // ASK territory: some keys moved
	}
	must(dst, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	must(src, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
	for _, m := range cluster.MasterAddrs(ctx) {
		if m == source || m == target {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: m})
		must(c, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
		c.Close()
	}
}

// TestClusterColdStartWithSeedsUnreachable starts a cluster client whose
// seed nodes all refuse or all black-hole: loading the slot map is part of
// the decision's budget, so every decision (breaker off, each one tries)
// still answers within it, fail-open from the fallback, fail-closed with
// ErrUnavailable.
func TestClusterColdStartWithSeedsUnreachable(t *testing.T) {
	server := redistest.StartServer(t) // never reached: only a target for the proxies
	for _, mode := range []faultproxy.Mode{faultproxy.Refuse, faultproxy.BlackHole} {
		t.Run(mode.String(), func(t *testing.T) {
			var seeds []string
			for range 3 {
				p := faultproxy.StartTest(t, server.Addr())
				p.SetModeTest(t, mode)
				seeds = append(seeds, p.Addr())
			}
			client := productionClient(t, clusterURL(seeds), true)
			gate := productionGate(t, client, "coldcluster", ratelimit.GateOptions{BreakerDisabled: true})
			check := ratelimit.Check{Identity: "198.51.100.30", Limit: ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}}
			var open, closed decisionLog
			for range 5 {
				if _, err := open.decide(gate, ratelimit.FailOpen, check); err != nil {
					t.Errorf("fail-open decision: %v", err)
				}
				if _, err := closed.decide(gate, ratelimit.FailClosed, check); !isUnavailable(err) {
					t.Errorf("fail-closed decision: err = %v, want ErrUnavailable", err)
				}
			}
			open.checkWithinBudget(t, "fail-open")
			closed.checkWithinBudget(t, "fail-closed")
			if open.degraded != 5 {
				t.Errorf("%d of 5 fail-open decisions degraded, want all", open.degraded)
			}
		})
	}
}
