package redistest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// readyTimeout bounds how long a starting redis-server may take to
	// answer PING.
	readyTimeout = 10 * time.Second

	// stopTimeout bounds how long a graceful stop may take before the
	// process is killed anyway, so that a wedged server never outlives the
	// test.
	stopTimeout = 10 * time.Second

	// shutdownTimeout bounds the SHUTDOWN command itself; a server that
	// cannot even take it is sent SIGTERM instead.
	shutdownTimeout = time.Second

	// startAttempts is how many fresh ports a new server tries when the one
	// picked is taken before redis-server can bind it.
	startAttempts = 5

	// probeTimeout bounds one readiness probe, so that a port taken by a
	// process that accepts connections but never answers does not hold up
	// noticing that our server has exited.
	probeTimeout = 250 * time.Millisecond

	// pollInterval is the pause between readiness and topology probes.
	pollInterval = 10 * time.Millisecond

	// logName is the file, in the server's directory, that receives the
	// server's log and anything it prints before the log is set up.
	logName = "redis.log"

	// logTailLines is how much of the log a startup failure quotes.
	logTailLines = 20
)

// errPortInUse marks a start that failed because another process held the
// server's port (or, for a cluster node, its bus port).
var errPortInUse = errors.New("port already in use")

// Server is one redis-server process listening on 127.0.0.1 at a port chosen
// when it was first started. It keeps that port across Restart. Its methods
// are safe for concurrent use.
type Server struct {
	port   int
	dir    string   // working directory: data files, nodes.conf, the log
	args   []string // extra redis-server arguments, after ours
	tls    *ServerCert
	access access // how the harness's own probes connect

	mu     sync.Mutex
	proc   *exec.Cmd
	exited chan struct{} // closed once proc has exited and been reaped
}

// StartServer starts a single redis-server on a free loopback port and waits
// until it answers PING. args are appended to the harness's own arguments
// (bind, port, dir, no persistence) and may add to them but must not change
// bind, port or dir. The server is stopped when t and its subtests finish,
// whether they pass, fail or panic. StartServer fails t if redis-server is
// missing or does not start; the failure quotes the end of the server's log.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	return StartServerWith(t, Options{Args: args})
}

// AdminUser is the ACL user the harness creates on a server started with
// Options.Admin, and authenticates as.
const AdminUser = "redistest-admin"

// Options configure a server started by StartServerWith. The zero value is
// StartServer's server.
type Options struct {
	// TLS, when set, makes the server accept TLS connections only: its port
	// is a --tls-port (the plain port is off) and it presents TLS.CertFile.
	// It does not ask clients for certificates. The harness's own probes do
	// not verify the server's certificate; the clients under test should.
	TLS *ServerCert
	// Admin creates the ACL user AdminUser, with a random password and
	// every permission, through the server's command line, and makes the
	// harness's probes and Client authenticate as it. The test may then
	// lock the default user out (ACL SETUSER default off, requirepass) and
	// the harness still starts, probes and stops the server.
	Admin bool
	// Cluster makes the server a one-node Redis Cluster serving all 16384
	// slots (its cluster bus, on port+10000, speaks TLS too when TLS is
	// set), for clients that must talk the cluster protocol. StartServerWith
	// then also waits until the node reports cluster_state:ok, which a
	// fresh node does only about two seconds after it has all slots.
	Cluster bool
	// Args are appended to the harness's own arguments, as StartServer's
	// args are.
	Args []string
}

// StartServerWith is StartServer with options: TLS, an admin ACL user, a
// one-node cluster.
func StartServerWith(t testing.TB, opts Options) *Server {
	t.Helper()
	RequireRedis(t)
	if opts.Cluster {
		clusterArgs := []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", clusterConfigFile,
			"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
		}
		if opts.TLS != nil {
			clusterArgs = append(clusterArgs, "--tls-cluster", "yes")
		}
		opts.Args = append(clusterArgs, opts.Args...)
	}
	s, err := launchServer(t.TempDir(), opts.Cluster, opts)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(s.Stop)
	if opts.Cluster {
		ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
		defer cancel()
		if err := s.serveAllSlots(ctx); err != nil {
			t.Fatalf("make %s a one-node cluster: %v\nlast lines of its log:\n%s", s.Addr(), err, s.logTail())
		}
	}
	return s
}

// serveAllSlots assigns every slot to the server, a cluster node that has
// met no other, and waits until it reports the cluster ok.
func (s *Server) serveAllSlots(ctx context.Context) error {
	if err := addSlots(ctx, s.access, s.Addr(), 0, clusterSlots-1); err != nil {
		return err
	}
	return poll(ctx, "cluster_state:ok", func() error {
		info, err := s.access.do(ctx, s.Addr(), "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if state, _ := infoField(info, "cluster_state"); state != "ok" {
			return fmt.Errorf("cluster_state:%s", state)
		}
		return nil
	})
}

// launchServer starts a server in dir, picking a new port whenever the
// previous pick turns out to be taken. With clusterBus, the port's cluster
// bus port must be free too.
func launchServer(dir string, clusterBus bool, opts Options) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create server directory: %w", err)
	}
	s := &Server{dir: dir, args: opts.Args, tls: opts.TLS}
	s.access.tls = opts.TLS != nil
	if opts.Admin {
		password, err := randomPassword()
		if err != nil {
			return nil, err
		}
		s.access.user, s.access.password = AdminUser, password
	}
	for attempt := 1; ; attempt++ {
		port, err := pickPort(clusterBus)
		if err != nil {
			return nil, err
		}
		s.port = port
		s.mu.Lock()
		err = s.startLocked()
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return nil, fmt.Errorf("attempt %d: %w", attempt, err)
		}
	}
}

// randomPassword returns 32 random hex digits.
func randomPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make admin password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Port returns the server's port: its TLS port when it serves TLS.
func (s *Server) Port() int { return s.port }

// URL returns the server's address as a redis:// URL, or a rediss:// one
// when it serves TLS, as accepted by redis.ParseURL. It carries no
// credentials.
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// Stop shuts the server down gracefully with SHUTDOWN NOSAVE NOW, or SIGTERM
// if the server does not take that command, and returns once the process has
// exited. A server still running after 10 s is killed so that it cannot
// outlive the test. Stop does nothing if the server is not running, so it may
// be called any number of times, also after Kill.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// Kill sends the server SIGKILL, as a crash would, and returns once the
// process has exited. It does nothing if the server is not running.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runningLocked() {
		s.killLocked()
	}
}

// Restart stops the server if it is running and starts it again on the same
// port with an empty data set: RDB and AOF files left in its directory (a
// replica writes one on full sync) are removed first. A cluster node keeps its
// nodes.conf, so it rejoins its cluster as the same node, as a real node
// restarted without persistence would. Restart returns once the new process
// answers PING; for a cluster node that does not mean the cluster has
// absorbed it. It fails t if the port has been taken meanwhile or the server
// does not start.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	if err := s.startLocked(); err != nil {
		t.Fatalf("restart server on %s: %v", s.Addr(), err)
	}
}

// Client returns a new go-redis client for the server, with its own
// connection pool, closed when t finishes. The client survives Restart: it
// reconnects on the same address. It connects the way the harness does:
// over TLS without verifying the server when the server serves TLS, and as
// AdminUser when the server has one. It is for setting a server up and
// inspecting it, not for the code under test.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: s.Addr(), Username: s.access.user, Password: s.access.password}
	if s.access.tls {
		opt.TLSConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() {
		if err := client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			t.Errorf("close client for %s: %v", s.Addr(), err)
		}
	})
	return client
}

// running reports whether the server process is alive.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runningLocked()
}

func (s *Server) runningLocked() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// startLocked starts a process on s.port and waits until it answers. On
// failure no process is left running.
func (s *Server) startLocked() error {
	if s.runningLocked() {
		return fmt.Errorf("server on %s is already running", s.Addr())
	}
	bin, err := serverBinary()
	if err != nil {
		return err
	}
	if err := s.removeData(); err != nil {
		return err
	}

	logPath := filepath.Join(s.dir, logName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("find end of server log: %w", err)
	}

	cmd := exec.Command(bin, s.commandLine()...)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		// The exit status adds nothing to what the log says.
		_ = cmd.Wait()
		close(exited)
	}()
	s.proc, s.exited = cmd, exited

	if err := waitReady(s.access, s.Addr(), cmd.Process.Pid, exited); err != nil {
		s.killLocked()
		tail := readLogTail(logPath, logStart, logTailLines)
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return fmt.Errorf("%s on %s: %w\nlast lines of %s:\n%s", bin, s.Addr(), err, logPath, tail)
	}
	return nil
}

// commandLine returns the redis-server arguments: ours first so that the
// test's extra arguments can add to them.
func (s *Server) commandLine() []string {
	port, plainPort := strconv.Itoa(s.port), strconv.Itoa(s.port)
	if s.tls != nil {
		plainPort = "0"
	}
	args := []string{
		"--bind", "127.0.0.1",
		"--port", plainPort,
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		// A master would otherwise wait 5 s for more replicas before a
		// diskless full sync, which dominates cluster start-up.
		"--repl-diskless-sync-delay", "0",
	}
	if s.tls != nil {
		args = append(args,
			"--tls-port", port,
			"--tls-cert-file", s.tls.CertFile,
			"--tls-key-file", s.tls.KeyFile,
			"--tls-ca-cert-file", s.tls.CAFile,
			"--tls-auth-clients", "no",
		)
	}
	if s.access.password != "" {
		// The config file's "user" directive: on, the password, all keys,
		// all channels, all commands.
		args = append(args, "--user", s.access.user, "on", ">"+s.access.password, "~*", "&*", "+@all")
	}
	return append(args, s.args...)
}

// removeData deletes everything in the server's directory except its log and
// nodes.conf, so that the next start begins with no data.
func (s *Server) removeData() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("list server directory: %w", err)
	}
	for _, e := range entries {
		if e.Name() == logName || e.Name() == clusterConfigFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			return fmt.Errorf("remove old data: %w", err)
		}
	}
	return nil
}

func (s *Server) stopLocked() {
	if !s.runningLocked() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	// NOW keeps a Redis 7 master from waiting for lagging replicas. A server
	// that accepts SHUTDOWN closes the connection without replying; anything
	// else (an error reply from an older Redis, no answer) means it did not.
	_, err := s.access.do(ctx, s.Addr(), "SHUTDOWN", "NOSAVE", "NOW")
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		// With --save "" SIGTERM does not write an RDB either.
		_ = s.proc.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.killLocked()
	}
}

func (s *Server) killLocked() {
	// The only error is "process already finished", which is what we want.
	_ = s.proc.Process.Kill()
	<-s.exited
}

// waitReady waits until the process with the given pid answers PING on addr.
// Checking the pid matters: the port was free when picked, but another
// server may have taken it since, and that server would answer PING too.
func waitReady(a access, addr string, pid int, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var lastErr error
	for {
		probeCtx, cancelProbe := context.WithTimeout(ctx, probeTimeout)
		lastErr = probeServer(probeCtx, a, addr, pid)
		cancelProbe()
		if lastErr == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING within %v: %w", readyTimeout, lastErr)
		case <-time.After(pollInterval):
		}
	}
}

// probeServer checks that the server at addr answers PING and is the process
// with the given pid.
func probeServer(ctx context.Context, a access, addr string, pid int) error {
	pong, err := a.do(ctx, addr, "PING")
	if err != nil {
		return err
	}
	if pong != "PONG" {
		return fmt.Errorf("PING on %s: got %q, want PONG", addr, pong)
	}
	info, err := a.do(ctx, addr, "INFO", "server")
	if err != nil {
		return err
	}
	if got, _ := infoField(info, "process_id"); got != strconv.Itoa(pid) {
		return fmt.Errorf("%s is served by process %q, not by ours (%d)", addr, got, pid)
	}
	return nil
}

// logTail returns the last lines of the server's log.
func (s *Server) logTail() string {
	return readLogTail(filepath.Join(s.dir, logName), 0, logTailLines)
}

// readLogTail returns up to n last lines written to the log at path since offset.
func readLogTail(path string, offset int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// PingMicros is the mean round trip of a bare PING to the server, in
// microseconds, over 2,000 of them: what a benchmark of a decision
// reports beside its own figure, as the part of it that is the network.
func (s *Server) PingMicros(t testing.TB) float64 {
	t.Helper()
	c := s.Client(t)
	const n = 2000
	start := time.Now()
	for range n {
		if err := c.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return float64(time.Since(start).Microseconds()) / n
}
