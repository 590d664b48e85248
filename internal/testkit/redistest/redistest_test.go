package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestMain fails the run if any server started by these tests outlives them.
func TestMain(m *testing.M) {
	code := m.Run()
	if leftovers := childRedisServers(); len(leftovers) > 0 {
		fmt.Fprintf(os.Stderr, "server processes left running: %v\n", leftovers)
		code = 1
	}
	os.Exit(code)
}

// childRedisServers lists the pids of this process's children running the
// server binary (redis-server, or what REDIS_SERVER names), using /proc;
// elsewhere it finds none.
func childRedisServers() []int {
	server, _ := Binaries()
	// The kernel's comm: the executable's file name, cut to 15 bytes.
	comm := filepath.Base(server)
	if len(comm) > 15 {
		comm = comm[:15]
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		name, rest, ok := strings.Cut(string(stat), ") ")
		if !ok || !strings.HasSuffix(name, "("+comm) {
			continue
		}
		if fields := strings.Fields(rest); len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestStartServerListensOnFreeLoopbackPort(t *testing.T) {
	begin := time.Now()
	s := StartServer(t)
	t.Logf("single server ready in %v", time.Since(begin))

	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		t.Fatalf("Addr() = %q: %v", s.Addr(), err)
	}
	if host != "127.0.0.1" || port == "6379" {
		t.Errorf("Addr() = %q, want 127.0.0.1 and a port other than 6379", s.Addr())
	}
	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", s.URL(), err)
	}
	if opt.Addr != s.Addr() {
		t.Errorf("URL() = %q names %q, want %q", s.URL(), opt.Addr, s.Addr())
	}
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Errorf("PING: %v", err)
	}
}

func TestStartServerPassesExtraArgs(t *testing.T) {
	s := StartServer(t, "--maxmemory", "1mb")
	got, err := s.Client(t).ConfigGet(t.Context(), "maxmemory").Result()
	if err != nil {
		t.Fatalf("CONFIG GET maxmemory: %v", err)
	}
	if got["maxmemory"] != "1048576" {
		t.Errorf("maxmemory = %q, want 1048576", got["maxmemory"])
	}
}

func TestRestartComesBackEmptyOnSamePort(t *testing.T) {
	tests := []struct {
		name string
		// prepare runs before Restart, after the key has been written.
		prepare func(t *testing.T, s *Server, c *redis.Client)
	}{
		{name: "after Stop", prepare: func(t *testing.T, s *Server, c *redis.Client) { s.Stop() }},
		{name: "after Kill", prepare: func(t *testing.T, s *Server, c *redis.Client) { s.Kill() }},
		{name: "while running", prepare: func(t *testing.T, s *Server, c *redis.Client) {}},
		{name: "with an RDB file on disk", prepare: func(t *testing.T, s *Server, c *redis.Client) {
			// A replica's full sync leaves such a file; it must not be loaded.
			if err := c.Save(t.Context()).Err(); err != nil {
				t.Fatalf("SAVE: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := StartServer(t)
			c := s.Client(t)
			addr := s.Addr()
			if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			tt.prepare(t, s, c)

			s.Restart(t)

			if s.Addr() != addr {
				t.Errorf("Addr() after Restart = %q, want %q", s.Addr(), addr)
			}
			if err := c.Get(t.Context(), "k").Err(); !errors.Is(err, redis.Nil) {
				t.Errorf("GET k after Restart: err = %v, want redis.Nil", err)
			}
		})
	}
}

func TestStopEndsProcessAndIsIdempotent(t *testing.T) {
	s := StartServer(t)
	pid := s.proc.Process.Pid

	s.Stop()
	s.Stop()
	s.Kill()

	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after Stop: kill(0) = %v, want ESRCH", pid, err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Errorf("%s still accepts connections after Stop", s.Addr())
	}
}

func TestStartFailureQuotesServerLog(t *testing.T) {
	RequireRedis(t)
	_, err := launchServer(t.TempDir(), false, Options{Args: []string{"--no-such-directive", "x"}})
	if err == nil {
		t.Fatal("launchServer with a bad directive succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Errorf("error does not quote the log's complaint:\n%v", err)
	}
}

func TestStartDetectsPortTakenByAnotherProcess(t *testing.T) {
	RequireRedis(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &Server{port: l.Addr().(*net.TCPAddr).Port, dir: t.TempDir()}

	s.mu.Lock()
	err = s.startLocked()
	s.mu.Unlock()

	if !errors.Is(err, errPortInUse) {
		t.Errorf("start on a taken port: err = %v, want errPortInUse", err)
	}
	if s.running() {
		t.Error("server still running after failed start")
		s.Kill()
	}
}

func TestPickPort(t *testing.T) {
	for _, clusterBus := range []bool{false, true} {
		t.Run(fmt.Sprintf("clusterBus=%v", clusterBus), func(t *testing.T) {
			for range 50 {
				port, err := pickPort(clusterBus)
				if err != nil {
					t.Fatal(err)
				}
				if port == reservedPort {
					t.Fatalf("picked reserved port %d", port)
				}
				if clusterBus && port > maxClusterPort {
					t.Fatalf("picked %d for a cluster node, want <= %d", port, maxClusterPort)
				}
			}
		})
	}
}

func TestParseClusterNodes(t *testing.T) {
	text := "" +
		"07c3 127.0.0.1:30004@40004,host-a slave e7d1 0 1426238317239 4 connected\n" +
		"67ed 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922\n" +
		"e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 [93->-292f]\n" +
		"6ec2 127.0.0.1:30005@40005 master,fail? - 1426238316232 0 5 connected\n" +
		"9a1b :0@0 handshake,noaddr - 0 0 0 disconnected\n"
	view, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id   string
		want clusterNodeEntry
	}{
		{"07c3", clusterNodeEntry{id: "07c3", addr: "127.0.0.1:30004", flags: "slave", connected: true, masterID: "e7d1", slots: []string{}}},
		{"67ed", clusterNodeEntry{id: "67ed", addr: "127.0.0.1:30002", flags: "master", master: true, connected: true, slots: []string{"5461-10922"}}},
		{"e7d1", clusterNodeEntry{id: "e7d1", addr: "127.0.0.1:30001", flags: "myself,master", myself: true, master: true, connected: true, slots: []string{"0-5460", "[93->-292f]"}}},
		{"6ec2", clusterNodeEntry{id: "6ec2", addr: "127.0.0.1:30005", flags: "master,fail?", master: true, failing: true, connected: true, slots: []string{}}},
		{"9a1b", clusterNodeEntry{id: "9a1b", addr: ":0", flags: "handshake,noaddr", handshake: true, slots: []string{}}},
	}
	for _, tt := range tests {
		got, ok := view.byID(tt.id)
		if !ok {
			t.Errorf("node %s missing", tt.id)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("node %s = %+v, want %+v", tt.id, got, tt.want)
		}
	}
}

func TestClusterSpreadsKeysAndFailsOver(t *testing.T) {
	begin := time.Now()
	c := StartCluster(t, 3, 1)
	t.Logf("3x1 cluster ready in %v", time.Since(begin))
	ctx := t.Context()

	if got := len(c.Addrs()); got != 6 {
		t.Fatalf("len(Addrs()) = %d, want 6", got)
	}
	masters := c.MasterAddrs(ctx)
	if len(masters) != 3 {
		t.Fatalf("MasterAddrs() = %v, want 3 masters", masters)
	}
	client := c.Client(t)

	t.Run("keys spread over all masters", func(t *testing.T) {
		const keys = 300
		for i := range keys {
			if err := client.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
				t.Fatalf("SET key:%d: %v", i, err)
			}
		}
		var total int64
		for _, addr := range masters {
			n, err := c.Node(addr).Client(t).DBSize(ctx).Result()
			if err != nil {
				t.Fatalf("DBSIZE on %s: %v", addr, err)
			}
			if n == 0 {
				t.Errorf("master %s holds no keys", addr)
			}
			total += n
		}
		if total != keys {
			t.Errorf("masters hold %d keys in all, want %d", total, keys)
		}
	})

	// Each step fails over the shard the previous step touched, so that the
	// last one has to respect Redis's vote cooldown.
	first := masters[0]
	var second string
	t.Run("Failover promotes a replica", func(t *testing.T) {
		begin := time.Now()
		c.Failover(t, first)
		t.Logf("failover settled in %v", time.Since(begin))

		now := c.MasterAddrs(ctx)
		if len(now) != 3 || slices.Contains(now, first) {
			t.Fatalf("MasterAddrs() after failover = %v, want 3 masters without %s", now, first)
		}
		second = newAddr(now, masters)
		role, err := c.Node(first).Client(t).Do(ctx, "ROLE").Slice()
		if err != nil || len(role) == 0 || role[0] != "slave" {
			t.Errorf("ROLE on old master %s = %v, %v; want slave", first, role, err)
		}
		if err := client.Set(ctx, "after-failover", "v", 0).Err(); err != nil {
			t.Errorf("SET through cluster client after failover: %v", err)
		}
	})

	t.Run("Failover of a killed master forces promotion", func(t *testing.T) {
		if second == "" {
			t.Skip("previous step failed")
		}
		before := c.MasterAddrs(ctx)
		c.Node(second).Kill()
		begin := time.Now()
		c.Failover(t, second)
		t.Logf("forced failover settled in %v", time.Since(begin))

		after := c.MasterAddrs(ctx)
		if len(after) != 3 || slices.Contains(after, second) || newAddr(after, before) != first {
			t.Fatalf("MasterAddrs() after forced failover = %v, want 3 masters with %s instead of %s", after, first, second)
		}
		// The old client still maps the dead master's slots to it.
		fresh := c.Client(t)
		for i := range 50 {
			if err := fresh.Set(ctx, fmt.Sprintf("key:%d", i), "after", 0).Err(); err != nil {
				t.Fatalf("SET key:%d after forced failover: %v", i, err)
			}
		}
	})

	t.Run("Failover back to a restarted node", func(t *testing.T) {
		if second == "" || c.Node(second).running() {
			t.Skip("previous step failed")
		}
		// Failing over right after Restart pins that Failover waits for
		// the peers' bus links to the restarted node; failing over the
		// shard replaced seconds ago pins the wait for the vote cooldown.
		c.Node(second).Restart(t)
		begin := time.Now()
		c.Failover(t, first)
		t.Logf("fail-back to the restarted node settled in %v", time.Since(begin))
		if now := c.MasterAddrs(ctx); !slices.Contains(now, second) || slices.Contains(now, first) {
			t.Errorf("MasterAddrs() after fail-back = %v, want %s instead of %s", now, second, first)
		}
	})
}

// newAddr returns the first address in now that is not in before.
func newAddr(now, before []string) string {
	for _, addr := range now {
		if !slices.Contains(before, addr) {
			return addr
		}
	}
	return ""
}

// TestMasterAddrsWithoutRunningNodes pins the documented nil result.
func TestMasterAddrsWithoutRunningNodes(t *testing.T) {
	var c Cluster
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if got := c.MasterAddrs(ctx); got != nil {
		t.Errorf("MasterAddrs() = %v, want nil", got)
	}
}
