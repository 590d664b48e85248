// Package lambdatest runs a function the way Lambda runs it, for tests:
// it builds the function's bootstrap for the host (static, -tags
// lambda.norpc, as for provided.al2023) and runs it under the AWS Lambda
// Runtime Interface Emulator (RIE), built from its Go module into the
// repository's bin folder. Several emulators can run at once, each on its
// own free ports, like several warm Lambda instances.
package lambdatest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RIEModule and RIEVersion pin the emulator; mk/functions.mk uses the same.
const (
	RIEModule  = "github.com/aws/aws-lambda-runtime-interface-emulator"
	RIEVersion = "v0.0.0-20261030222936-bef5c4ba774d"
	rieCommand = RIEModule + "/cmd/aws-lambda-rie"
)

// InvocationsPath is the RIE's invoke endpoint.
const InvocationsPath = "/2015-03-31/functions/function/invocations"

var (
	buildMu sync.Mutex
	built   = map[string]*bootstrapBuild{} // package and tags -> its build
	rieOnce sync.Once
	riePath string
	rieErr  error
)

// ModuleRoot is the directory of the go.mod of the module under test.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}

// BuildBootstrap builds the main package pkg (e.g. "./functions/authorizer",
// relative to the module root) as a bootstrap for the host's OS and
// architecture, once per test binary, and returns its path.
func BuildBootstrap(t testing.TB, pkg string) string {
	t.Helper()
	return BuildBootstrapTags(t, pkg)
}

// BuildBootstrapTags is BuildBootstrap with build tags beyond lambda.norpc,
// e.g. "noxray" for the build of `make build TRACER=none`. Each package and
// set of tags is built once per test binary; builds of different ones may
// run at once (tests in parallel each waiting for their own), a second
// caller of one waits for its build.
func BuildBootstrapTags(t testing.TB, pkg string, tags ...string) string {
	t.Helper()
	allTags := strings.Join(append([]string{"lambda.norpc"}, tags...), ",")
	id := pkg + " " + allTags
	buildMu.Lock()
	b, ok := built[id]
	if !ok {
		if len(built) == 0 {
			// The first build of this test binary: no build of it runs yet.
			removeStaleBuilds(filepath.Join(os.TempDir(), "slidegate-lambdatest"))
		}
		b = &bootstrapBuild{}
		built[id] = b
	}
	buildMu.Unlock()
	b.once.Do(func() { b.path, b.err = buildBootstrap(pkg, allTags, tags) })
	if b.err != nil {
		t.Fatalf("build bootstrap %s (tags %s): %v", pkg, allTags, b.err)
	}
	return b.path
}

// bootstrapBuild is one package and set of tags, built once.
type bootstrapBuild struct {
	once sync.Once
	path string
	err  error
}

// buildBootstrap builds pkg with allTags into a folder of this test
// process's, named for pkg and tags.
func buildBootstrap(pkg, allTags string, tags []string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	name := strings.NewReplacer("/", "_", ".", "_").Replace(pkg)
	for _, tag := range tags {
		name += "_" + strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(tag)
	}
	dir := filepath.Join(os.TempDir(), "slidegate-lambdatest", name+"-"+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", allTags, "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, msg)
	}
	return out, nil
}

// removeStaleBuilds deletes the bootstraps of test processes that are gone
// (each test binary builds into a folder named for its pid, so that test
// binaries running at once never overwrite each other's bootstrap).
func removeStaleBuilds(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		i := strings.LastIndexByte(e.Name(), '-')
		pid, err := strconv.Atoi(e.Name()[i+1:])
		if i < 0 || err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

// RIEBinary returns the emulator binary, building it into <module>/bin with
// go install the first time (this needs the Go module proxy once).
func RIEBinary(t testing.TB) string {
	t.Helper()
	rieOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			rieErr = err
			return
		}
		bin := filepath.Join(root, "bin")
		riePath = filepath.Join(bin, "aws-lambda-rie")
		if _, err := os.Stat(riePath); err == nil {
			return
		}
		cmd := exec.Command("go", "install", rieCommand+"@"+RIEVersion)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			rieErr = fmt.Errorf("go install %s@%s: %w\n%s", rieCommand, RIEVersion, err, msg)
		}
	})
	if rieErr != nil {
		t.Fatalf("runtime interface emulator: %v", rieErr)
	}
	return riePath
}

// RIE is one running emulator with one function: one warm instance.
type RIE struct {
	// Addr is the emulator's HTTP address, 127.0.0.1:PORT.
	Addr string
	// Started is when the emulator process was started.
	Started time.Time

	cmd     *exec.Cmd
	logPath string
	client  *http.Client
	done    chan struct{}
}

// StartRIE starts the emulator on free ports, running bootstrap with the
// given environment (on top of a minimal one: PATH, HOME, a fake AWS
// region, IMDS disabled). The emulator starts the bootstrap on the first
// invocation, as Lambda does on a cold start. It is stopped, with the
// bootstrap, when t finishes; its log (emulator and function) is written
// to the test log if t failed.
func StartRIE(t testing.TB, bootstrap string, env map[string]string) *RIE {
	t.Helper()
	bin := RIEBinary(t)
	// A port free when picked can be taken before the emulator binds it
	// (another test's server, or an outgoing connection's local port): the
	// emulator then exits at once, and another pair of ports is tried.
	const attempts = 5
	for attempt := 1; ; attempt++ {
		r, err := startRIEOnce(t, bin, bootstrap, env)
		if err == nil {
			return r
		}
		if attempt == attempts || !strings.Contains(r.Logs(), "address already in use") {
			t.Fatalf("start RIE: %v\n%s", err, r.Logs())
		}
		r.Stop()
	}
}

// startRIEOnce starts the emulator on two freshly picked ports and waits
// until it listens. On error the returned RIE holds the emulator's log.
func startRIEOnce(t testing.TB, bin, bootstrap string, env map[string]string) (*RIE, error) {
	t.Helper()
	rieAddr, err := freeAddr()
	if err != nil {
		t.Fatalf("start RIE: %v", err)
	}
	apiAddr, err := freeAddr()
	if err != nil {
		t.Fatalf("start RIE: %v", err)
	}
	cmd := exec.Command(bin,
		"--runtime-interface-emulator-address", rieAddr,
		"--runtime-api-address", apiAddr,
		"--log-level", "error",
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = baseEnv(env)
	// The log is a file, not a pipe: the emulator hands its own standard
	// output to the bootstrap, so the function writes straight into the
	// file, and a line written before an answer can be read as soon as the
	// answer is in. Through a pipe, a goroutine of the test process copies
	// it, and a loaded machine can run that copy after the test has read
	// the log (a line "missing" from a log that holds it a moment later).
	logFile, err := os.CreateTemp(t.TempDir(), "rie-*.log")
	if err != nil {
		t.Fatalf("start RIE: log file: %v", err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = emulatorProcAttr()
	r := &RIE{Addr: rieAddr, cmd: cmd, logPath: logFile.Name(), done: make(chan struct{}),
		client: &http.Client{Timeout: 30 * time.Second}}
	r.Started = time.Now()
	err = cmd.Start()
	_ = logFile.Close() // the emulator holds its own descriptor
	if err != nil {
		t.Fatalf("start RIE: %v", err)
	}
	go func() { _ = cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("RIE %s log:\n%s", r.Addr, r.Logs())
		}
	})
	if err := r.waitListening(10 * time.Second); err != nil {
		return r, err
	}
	return r, nil
}

func baseEnv(env map[string]string) []string {
	vars := map[string]string{
		"PATH":                        os.Getenv("PATH"),
		"HOME":                        os.Getenv("HOME"),
		"TMPDIR":                      os.TempDir(),
		"AWS_REGION":                  "us-east-1",
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "30",
	}
	for k, v := range env {
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

func (r *RIE) waitListening(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", r.Addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-r.done:
			return errors.New("emulator exited before listening")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("emulator not listening on %s after %s", r.Addr, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FunctionError is the error payload a function returned
// ({"errorMessage": ..., "errorType": ...}), e.g. "Unauthorized".
type FunctionError struct {
	Message string `json:"errorMessage"`
	Type    string `json:"errorType"`
}

// Error implements error.
func (e *FunctionError) Error() string { return "function error " + e.Type + ": " + e.Message }

// Invoke sends one event and returns the function's response. A function
// error comes back as a *FunctionError; a transport failure as another
// error.
func (r *RIE) Invoke(t testing.TB, event []byte) ([]byte, error) {
	t.Helper()
	return r.InvokeContext(context.Background(), event)
}

// InvokeContext is Invoke without a testing.TB, for benchmarks and
// goroutines.
func (r *RIE) InvokeContext(ctx context.Context, event []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+r.Addr+InvocationsPath, bytes.NewReader(event))
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", r.Addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: read response: %w", r.Addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("invoke %s: HTTP %d: %s", r.Addr, resp.StatusCode, body)
	}
	if fe := asFunctionError(body); fe != nil || resp.Header.Get("X-Amz-Function-Error") != "" {
		if fe == nil {
			fe = &FunctionError{Message: string(body), Type: resp.Header.Get("X-Amz-Function-Error")}
		}
		return body, fe
	}
	return body, nil
}

// asFunctionError recognises a Lambda error payload: an object whose only
// members are errorMessage, errorType and optionally stackTrace.
func asFunctionError(body []byte) *FunctionError {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	if _, ok := m["errorMessage"]; !ok {
		return nil
	}
	for k := range m {
		if k != "errorMessage" && k != "errorType" && k != "stackTrace" {
			return nil
		}
	}
	var fe FunctionError
	if json.Unmarshal(body, &fe) != nil {
		return nil
	}
	return &fe
}

// Logs returns everything the emulator and the function wrote so far: every
// line the function wrote before its last answer, but not necessarily a
// line it writes at the same time as an answer or after it (a cold-start
// load in the background, a log written once the waiters are released).
// For a line that must come, use WaitLogs; for a line that must never
// come, FinalLogs.
func (r *RIE) Logs() string {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return fmt.Sprintf("(log %s unreadable: %v)", r.logPath, err)
	}
	return string(b)
}

// LogWait bounds WaitLogs: long enough for a loaded machine to schedule a
// background goroutine, short enough that a line that never comes fails
// the test in seconds.
const LogWait = 10 * time.Second

// WaitLogs polls the log until done(log) holds, or the emulator has
// exited (nothing more can come), or LogWait has passed, and returns the
// log it last read: the test then checks it as it would check Logs. done
// should ask only for what must eventually be written, e.g. that a line
// is there.
func (r *RIE) WaitLogs(done func(logs string) bool) string {
	deadline := time.Now().Add(LogWait)
	for {
		logs := r.Logs()
		if done(logs) || time.Now().After(deadline) {
			return logs
		}
		select {
		case <-r.done:
			return r.Logs()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitLogsContaining is WaitLogs until the log holds every one of lines.
func (r *RIE) WaitLogsContaining(lines ...string) string {
	return r.WaitLogs(func(logs string) bool {
		for _, l := range lines {
			if !strings.Contains(logs, l) {
				return false
			}
		}
		return true
	})
}

// FinalLogs stops the emulator and the bootstrap and returns their whole
// log: complete, since nothing is left to write it. It is what a check
// that something never reached the log reads, at the end of a test.
func (r *RIE) FinalLogs() string {
	r.Stop()
	return r.Logs()
}

// Stop kills the emulator and the bootstrap and waits until both have
// exited (10s at most), so that neither writes to the log afterwards (a
// bootstrap that outlived its emulator would log the lost Runtime API). The
// emulator runs the bootstrap in a process group of its own: Stop kills the
// emulator's group and every process below the emulator. It may be called
// more than once.
func (r *RIE) Stop() {
	var below []int
	if r.cmd.Process != nil {
		select {
		case <-r.done:
		default:
			below = descendants(r.cmd.Process.Pid)
		}
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range below {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.After(10 * time.Second)
	select {
	case <-r.done:
	case <-deadline:
		return
	}
	for _, pid := range below {
		for !exited(pid) {
			select {
			case <-deadline:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// freeAddr returns a loopback address with a port free right now. It is
// picked below the kernel's ephemeral range (32768 and up on Linux), where
// the local ports of outgoing connections, which the tests open by the
// thousand, cannot take it before the emulator binds it; the kernel's own
// choice is the fallback.
func freeAddr() (string, error) {
	for range 50 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		_ = l.Close()
		return addr, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
