package redistest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSlots is the number of hash slots in a Redis Cluster.
	clusterSlots = 16384

	// clusterConfigFile is where a node keeps its view of the cluster; it
	// survives Restart.
	clusterConfigFile = "nodes.conf"

	// clusterNodeTimeout is short so that failure detection is quick. (A
	// fresh master still waits a fixed 2 s before it reports cluster_state:ok,
	// which is most of StartCluster's time.)
	clusterNodeTimeout = 2 * time.Second

	// voteCooldown is how long after voting for the replacement of a master
	// the other masters refuse to vote about that master again: Redis's
	// 2 × node timeout.
	voteCooldown = 2 * clusterNodeTimeout

	// clusterReadyTimeout bounds StartCluster's wait for a stable cluster and
	// Failover's wait for the promotion to settle.
	clusterReadyTimeout = 20 * time.Second
)

// Cluster is a real Redis Cluster on loopback: masters that split the 16384
// slots evenly, each with the same number of replicas, every node its own
// redis-server process. Its methods are safe for concurrent use.
type Cluster struct {
	nodes  []*Server          // masters first, then replicas, in start order
	byAddr map[string]*Server // the same nodes, by Addr

	mu         sync.Mutex
	replacedAt map[string]time.Time // when Failover last replaced the master at an address
}

// StartCluster starts masters*(1+replicas) cluster-enabled redis-server
// processes, assigns masters[i] the i-th even share of the slots, attaches
// replicas, and waits until the cluster is stable: every node reports
// cluster_state:ok with all slots served, all nodes agree on the topology,
// and every replica reports master_link_status:up. Each node's cluster bus
// listens on its port+10000. All nodes are stopped when t finishes. It fails
// t if redis-server is missing or the cluster does not form within 20 s.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	RequireRedis(t)
	if masters < 1 || replicas < 0 {
		t.Fatalf("start cluster: need at least 1 master and 0 replicas, got %d and %d", masters, replicas)
	}
	root := t.TempDir()
	c := &Cluster{byAddr: make(map[string]*Server), replacedAt: make(map[string]time.Time)}
	// Registered before any node starts, so that a partial start is cleaned
	// up too, and after TempDir, so that nodes stop before it is removed.
	t.Cleanup(c.stop)

	args := []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", clusterConfigFile,
		"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
	}
	for i := range masters * (1 + replicas) {
		node, err := launchServer(filepath.Join(root, fmt.Sprintf("node%d", i)), true, Options{Args: args})
		if err != nil {
			t.Fatalf("start cluster node %d: %v", i, err)
		}
		c.nodes = append(c.nodes, node)
		c.byAddr[node.Addr()] = node
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if err := c.form(ctx, masters, replicas); err != nil {
		t.Fatalf("form cluster of %d masters with %d replicas each: %v\n%s", masters, replicas, err, c.logTails())
	}
	return c
}

// Addrs returns the addresses of all nodes, running or not, masters first in
// the order StartCluster created them. Roles change on failover; use
// MasterAddrs for the current masters.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// MasterAddrs returns, sorted, the addresses of the nodes that currently
// serve slots as masters, according to CLUSTER NODES on the first running
// node that answers. A master that was killed keeps its slots until a replica
// takes them over. It returns nil if no node answers before ctx is done.
func (c *Cluster) MasterAddrs(ctx context.Context) []string {
	view, err := c.anyView(ctx)
	if err != nil {
		return nil
	}
	var masters []string
	for _, n := range view {
		if n.master && len(n.slots) > 0 {
			masters = append(masters, n.addr)
		}
	}
	slices.Sort(masters)
	return masters
}

// Node returns the server at addr, or nil if addr is not a node of c.
func (c *Cluster) Node(addr string) *Server {
	return c.byAddr[addr]
}

// Client returns a new go-redis cluster client seeded with every node, with
// its own connection pools, closed when t finishes. A client keeps the slot
// map it loaded: after a master is killed, its commands for that master's
// slots fail with connection errors until it reloads the map, while a client
// made after Failover starts from the new topology.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() {
		if err := client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			t.Errorf("close cluster client: %v", err)
		}
	})
	return client
}

// Failover moves the slots of the master at masterAddr to one of its
// replicas and waits until the cluster is stable again (as after
// StartCluster) with that master serving no slots.
//
// If the master's process is running, Failover first waits for the cluster to
// be stable, so that a replica restarted moments ago has caught up, then sends
// CLUSTER FAILOVER to the first running replica by address, and also waits
// until that replica is a master and the old master its replica. If the
// master's process is not running (Kill, Stop), it sends CLUSTER FAILOVER
// FORCE instead, unless the cluster has already promoted a replica by itself,
// which it does node-timeout (2 s) after noticing the master is gone.
//
// The masters refuse to vote about the same master twice within 4 s (twice
// the node timeout), so when Failover itself replaced masterAddr less than
// 4 s ago, as in failing a shard back, it first waits out the rest of that
// time; if an election fails anyway, it asks again.
//
// It fails t if masterAddr is not a master with a running replica or the
// cluster does not settle within 20 s.
func (c *Cluster) Failover(t testing.TB, masterAddr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	oldMaster := c.Node(masterAddr)
	if oldMaster == nil {
		t.Fatalf("fail over master %s: not a node of this cluster", masterAddr)
	}
	if err := c.waitVoteCooldown(ctx, masterAddr); err != nil {
		t.Fatalf("fail over master %s: %v", masterAddr, err)
	}
	var err error
	if oldMaster.running() {
		err = c.coordinatedFailover(ctx, masterAddr)
	} else {
		err = c.forcedFailover(ctx, masterAddr)
	}
	if err != nil {
		t.Fatalf("fail over master %s: %v\n%s", masterAddr, err, c.logTails())
	}
	c.mu.Lock()
	c.replacedAt[masterAddr] = time.Now()
	c.mu.Unlock()
}

// AwaitOwnFailover waits, for at most limit, until the cluster has replaced
// the master at masterAddr by itself (a running node's view shows it owning
// no slots), as it does node-timeout (2 s) and an election after noticing a
// master gone, and reports whether it has. Running out of time is no error:
// Failover then forces what the cluster has not done.
func (c *Cluster) AwaitOwnFailover(ctx context.Context, masterAddr string, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := poll(ctx, "the cluster to replace "+masterAddr, func() error {
		view, err := c.anyView(ctx)
		if err != nil {
			return err
		}
		if m, ok := view.byAddr(masterAddr); ok && len(m.slots) > 0 {
			return fmt.Errorf("%s still owns slots", masterAddr)
		}
		return nil
	})
	return err == nil
}

// waitVoteCooldown sleeps until the masters will vote about replacing the
// master at addr again, if Failover replaced it recently: asking earlier
// costs a failed election, and Redis lets a replica try again only 8 s after
// the last try.
func (c *Cluster) waitVoteCooldown(ctx context.Context, addr string) error {
	c.mu.Lock()
	last, ok := c.replacedAt[addr]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	// The margin covers the gap between the votes and our noticing them.
	wait := time.Until(last.Add(voteCooldown + 100*time.Millisecond))
	if wait <= 0 {
		return nil
	}
	select {
	case <-time.After(wait):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the vote cooldown: %w", ctx.Err())
	}
}

func (c *Cluster) coordinatedFailover(ctx context.Context, masterAddr string) error {
	// The replica must be in sync with its master, or the master's help
	// times out and the replica gives up.
	if err := c.waitStable(ctx, func(clusterView) error { return nil }); err != nil {
		return fmt.Errorf("before failover: %w", err)
	}
	view, err := c.anyView(ctx)
	if err != nil {
		return err
	}
	promoted, err := c.pickReplica(view, masterAddr)
	if err != nil {
		return err
	}
	err = promote(ctx, promoted, []string{"CLUSTER", "FAILOVER"}, func() error {
		repl, err := do(ctx, promoted, "INFO", "replication")
		if err != nil {
			return err
		}
		if role, _ := infoField(repl, "role"); role != "master" {
			return fmt.Errorf("%s is still a %s", promoted, role)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.waitStable(ctx, func(v clusterView) error {
		p, _ := v.byAddr(promoted)
		if !p.master || len(p.slots) == 0 {
			return fmt.Errorf("replica %s is not serving slots as a master yet", promoted)
		}
		if m, _ := v.byAddr(masterAddr); m.masterID != p.id {
			return fmt.Errorf("old master %s is not a replica of %s yet", masterAddr, promoted)
		}
		return nil
	})
}

func (c *Cluster) forcedFailover(ctx context.Context, masterAddr string) error {
	view, err := c.anyView(ctx)
	if err != nil {
		return err
	}
	// The dead master has lost its slots when the promoted replica's view,
	// or later the agreed one, says so.
	slotsMoved := func(v clusterView) error {
		if m, ok := v.byAddr(masterAddr); ok && len(m.slots) > 0 {
			return fmt.Errorf("dead master %s still owns slots", masterAddr)
		}
		return nil
	}
	if slotsMoved(view) != nil {
		promoted, err := c.pickReplica(view, masterAddr)
		if err != nil {
			return err
		}
		err = promote(ctx, promoted, []string{"CLUSTER", "FAILOVER", "FORCE"}, func() error {
			v, err := nodeView(ctx, promoted)
			if err != nil {
				return err
			}
			return slotsMoved(v)
		})
		if err != nil {
			return err
		}
	}
	return c.waitStable(ctx, slotsMoved)
}

// manualFailoverAttempt is how long promote waits before asking again: Redis
// abandons a manual failover after 5 s.
const manualFailoverAttempt = 6 * time.Second

// promote sends cmd (a CLUSTER FAILOVER variant) to replica until done
// reports success. One attempt can fail through no fault of the cluster:
// a master refuses to vote about the same master twice within 2×node-timeout
// (4 s), so failing a shard back right after failing it over, or forcing a
// failover of a master promoted moments ago, only works on a later attempt.
func promote(ctx context.Context, replica string, cmd []string, done func() error) error {
	for {
		_, sendErr := do(ctx, replica, cmd...)
		// A refusal can mean the cluster's own failover got there first
		// ("send CLUSTER FAILOVER to a replica"); done decides.
		var refused serverError
		if sendErr != nil && !errors.As(sendErr, &refused) {
			return fmt.Errorf("promote replica %s: %w", replica, sendErr)
		}
		attemptCtx, cancel := context.WithTimeout(ctx, manualFailoverAttempt)
		err := poll(attemptCtx, "replica "+replica+" to take over", done)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() == nil:
			continue
		case sendErr != nil:
			return fmt.Errorf("%w (it answered %s with %w)", err, strings.Join(cmd, " "), sendErr)
		default:
			return err
		}
	}
}

// pickReplica returns the lowest address among the running replicas that
// view lists for the master at masterAddr.
func (c *Cluster) pickReplica(view clusterView, masterAddr string) (string, error) {
	master, ok := view.byAddr(masterAddr)
	if !ok || !master.master || len(master.slots) == 0 {
		return "", errors.New("not a master serving slots")
	}
	var candidates []string
	for _, e := range view {
		if node := c.Node(e.addr); e.masterID == master.id && node != nil && node.running() {
			candidates = append(candidates, e.addr)
		}
	}
	if len(candidates) == 0 {
		return "", errors.New("master has no running replica")
	}
	return slices.Min(candidates), nil
}

// form turns the freshly started nodes into a cluster the way redis-cli
// --cluster create does, minus its one-second sleeps.
func (c *Cluster) form(ctx context.Context, masters, replicas int) error {
	ids := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		id, err := do(ctx, n.Addr(), "CLUSTER", "MYID")
		if err != nil {
			return err
		}
		ids[i] = id
	}
	for i := range masters {
		first, last := i*clusterSlots/masters, (i+1)*clusterSlots/masters-1
		if err := addSlots(ctx, access{}, c.nodes[i].Addr(), first, last); err != nil {
			return err
		}
	}
	// Distinct epochs up front spare the cluster from resolving collisions
	// one gossip round at a time; this only works before the nodes meet.
	for i, n := range c.nodes {
		if _, err := do(ctx, n.Addr(), "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return err
		}
	}
	// Every pair meets directly: waiting for gossip to spread the news takes
	// about a second longer.
	for i, a := range c.nodes {
		for _, b := range c.nodes[i+1:] {
			if _, err := do(ctx, a.Addr(), "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(b.port)); err != nil {
				return err
			}
		}
	}
	// CLUSTER REPLICATE needs the replica to know its master.
	err := poll(ctx, "every node to know every other node", func() error {
		for _, n := range c.nodes {
			view, err := nodeView(ctx, n.Addr())
			if err != nil {
				return err
			}
			for _, id := range ids {
				if e, ok := view.byID(id); !ok || e.handshake {
					return fmt.Errorf("%s does not know node %s yet", n.Addr(), id)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range masters {
		for j := range replicas {
			replica := c.nodes[masters+i*replicas+j]
			if _, err := do(ctx, replica.Addr(), "CLUSTER", "REPLICATE", ids[i]); err != nil {
				return err
			}
		}
	}
	return c.waitStable(ctx, func(v clusterView) error {
		for i, n := range c.nodes {
			e, _ := v.byAddr(n.Addr())
			switch {
			case i < masters && (!e.master || len(e.slots) == 0):
				return fmt.Errorf("%s is not serving slots as a master yet", n.Addr())
			case i >= masters && e.masterID != ids[(i-masters)/replicas]:
				return fmt.Errorf("%s is not replicating its master yet", n.Addr())
			}
		}
		return nil
	})
}

// addSlots assigns slots first..last to the node at addr.
func addSlots(ctx context.Context, a access, addr string, first, last int) error {
	_, err := a.do(ctx, addr, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last))
	var refused serverError
	if !errors.As(err, &refused) {
		return err
	}
	// Redis before 7.0 has no ADDSLOTSRANGE.
	args := []string{"CLUSTER", "ADDSLOTS"}
	for slot := first; slot <= last; slot++ {
		args = append(args, strconv.Itoa(slot))
	}
	if _, err := a.do(ctx, addr, args...); err != nil {
		return fmt.Errorf("assign slots %d-%d: %w", first, last, err)
	}
	return nil
}

// waitStable waits until every running node reports cluster_state:ok with
// all slots served, all running nodes describe the running nodes identically,
// as healthy and with their bus links to them up, every running replica's
// link to its master is up, and expect accepts that common view.
func (c *Cluster) waitStable(ctx context.Context, expect func(clusterView) error) error {
	return poll(ctx, "a stable cluster", func() error {
		var agreed clusterView
		var agreedBy, agreedTopology string
		for _, n := range c.nodes {
			if !n.running() {
				continue
			}
			if err := checkNodeHealthy(ctx, n.Addr()); err != nil {
				return err
			}
			view, err := nodeView(ctx, n.Addr())
			if err != nil {
				return err
			}
			topology, err := c.describeRunning(view)
			if err != nil {
				return fmt.Errorf("according to %s: %w", n.Addr(), err)
			}
			if agreed == nil {
				agreed, agreedBy, agreedTopology = view, n.Addr(), topology
			} else if topology != agreedTopology {
				return fmt.Errorf("nodes disagree: %s sees\n%s\nbut %s sees\n%s",
					agreedBy, agreedTopology, n.Addr(), topology)
			}
		}
		if agreed == nil {
			return errors.New("no node is running")
		}
		return expect(agreed)
	})
}

// checkNodeHealthy checks what the node at addr says about itself: the
// cluster is ok and, if the node is a replica, its link to the master is up.
func checkNodeHealthy(ctx context.Context, addr string) error {
	info, err := do(ctx, addr, "CLUSTER", "INFO")
	if err != nil {
		return err
	}
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": strconv.Itoa(clusterSlots),
		"cluster_slots_ok":       strconv.Itoa(clusterSlots),
	}
	for field, value := range want {
		if got, _ := infoField(info, field); got != value {
			return fmt.Errorf("%s reports %s:%s, want %s", addr, field, got, value)
		}
	}
	repl, err := do(ctx, addr, "INFO", "replication")
	if err != nil {
		return err
	}
	if role, _ := infoField(repl, "role"); role == "slave" {
		if link, _ := infoField(repl, "master_link_status"); link != "up" {
			return fmt.Errorf("%s reports master_link_status:%s, want up", addr, link)
		}
	}
	return nil
}

// describeRunning renders what view says about the running nodes (role,
// master, slots) in a canonical form for comparing views, or reports a
// running node that view is missing, sees as failing or has no link to.
func (c *Cluster) describeRunning(view clusterView) (string, error) {
	var lines []string
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		e, ok := view.byAddr(n.Addr())
		switch {
		case !ok:
			return "", fmt.Errorf("node %s is unknown", n.Addr())
		case e.failing || e.handshake:
			return "", fmt.Errorf("node %s is flagged %s", n.Addr(), e.flags)
		case !e.connected:
			// A restarted node looks fine until its peers reconnect, but
			// until then they drop what they send it, failover votes
			// included.
			return "", fmt.Errorf("bus link to node %s is down", n.Addr())
		}
		role := "master"
		if !e.master {
			role = "replica of " + e.masterID
			if m, ok := view.byID(e.masterID); ok {
				role = "replica of " + m.addr
			}
		}
		lines = append(lines, fmt.Sprintf("%s %s %s: %s", e.addr, e.id, role, strings.Join(e.slots, " ")))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

// anyView returns the CLUSTER NODES view of the first running node that
// answers.
func (c *Cluster) anyView(ctx context.Context) (clusterView, error) {
	err := errors.New("no node is running")
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		var view clusterView
		if view, err = nodeView(ctx, n.Addr()); err == nil {
			return view, nil
		}
	}
	return nil, fmt.Errorf("read cluster topology: %w", err)
}

// logTails returns the last lines of every node's log, for failure messages.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "last lines of the log of %s:\n%s\n", n.Addr(), n.logTail())
	}
	return b.String()
}

// stop stops all nodes at once.
func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
}

// poll calls check every pollInterval until it returns nil or ctx is done,
// and then reports what it was waiting for and check's last complaint.
func poll(ctx context.Context, what string, check func() error) error {
	var complaint error
	for {
		err := check()
		if err == nil {
			return nil
		}
		// A check cut short by the deadline says nothing about the cluster.
		// (The deadline can fail a dial before ctx.Err() reports it.)
		if deadline, ok := ctx.Deadline(); !ok || time.Now().Before(deadline) || complaint == nil {
			complaint = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w; last: %w", what, ctx.Err(), complaint)
		case <-time.After(pollInterval):
		}
	}
}

// clusterNodeEntry is one line of CLUSTER NODES.
type clusterNodeEntry struct {
	id        string
	addr      string // host:port, without the bus port and hostname
	flags     string
	myself    bool // the node that answered
	master    bool
	failing   bool // flagged fail or fail? (pfail)
	handshake bool // not yet fully met
	connected bool // the answering node's bus link to this node is up
	masterID  string
	slots     []string // slot ranges as listed, e.g. "0-5460"
}

// clusterView is one node's CLUSTER NODES reply.
type clusterView []clusterNodeEntry

func (v clusterView) byAddr(addr string) (clusterNodeEntry, bool) {
	for _, e := range v {
		if e.addr == addr {
			return e, true
		}
	}
	return clusterNodeEntry{}, false
}

func (v clusterView) byID(id string) (clusterNodeEntry, bool) {
	for _, e := range v {
		if e.id == id {
			return e, true
		}
	}
	return clusterNodeEntry{}, false
}

// nodeView asks the node at addr for CLUSTER NODES.
func nodeView(ctx context.Context, addr string) (clusterView, error) {
	text, err := do(ctx, addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	view, err := parseClusterNodes(text)
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", addr, err)
	}
	// A node learns its own IP from the first node it meets, so a lone node
	// lists itself as ":PORT".
	for i := range view {
		if view[i].myself {
			view[i].addr = addr
		}
	}
	return view, nil
}

// parseClusterNodes parses the CLUSTER NODES format:
//
//	<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...
func parseClusterNodes(text string) (clusterView, error) {
	var view clusterView
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 8 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		addr, _, _ := strings.Cut(fields[1], "@")
		flags := strings.Split(fields[2], ",")
		e := clusterNodeEntry{
			id:        fields[0],
			addr:      addr,
			flags:     fields[2],
			myself:    slices.Contains(flags, "myself"),
			master:    slices.Contains(flags, "master"),
			failing:   slices.Contains(flags, "fail") || slices.Contains(flags, "fail?"),
			handshake: slices.Contains(flags, "handshake") || slices.Contains(flags, "noaddr"),
			connected: fields[7] == "connected",
			slots:     fields[8:],
		}
		if fields[3] != "-" {
			e.masterID = fields[3]
		}
		view = append(view, e)
	}
	return view, nil
}
