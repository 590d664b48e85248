// Package mototest runs moto_server, moto's emulator of the AWS APIs, on a
// free loopback port for the tests of slidegate's AWS calls (API Gateway's
// GetApiKeys, GetUsagePlans and GetUsagePlanKeys, Secrets Manager's
// GetSecretValue), and fills it through the real AWS SDK for Go.
//
// One moto_server serves every test of a test binary: Shared starts it on
// first use. Tests do not share state: each Account is a region of its own
// (moto keeps its state per account and region, and takes any region name
// with MOTO_ALLOW_NONEXISTENT_REGION), so each starts empty.
//
// moto lacks some behaviours that tests need: it answers every listing in
// one page (it ignores limit and position), never throttles and never fails.
// Proxy, a reverse proxy in front of it, pages its listings, counts calls,
// fails the calls a test chooses and holds requests (holdgate); that is all
// it does.
package mototest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/slidegate/slidegate/internal/testkit"
)

// Tool is moto_server: MOTO=required (what .ci/run sets, passed on by
// `make test`) makes its absence fail the tests that need it; otherwise
// they skip, saying so.
var Tool = testkit.Tool{Name: "moto_server", Env: "MOTO", Install: "pip install 'moto[server]'"}

// startTimeout bounds moto_server's start: importing moto's Python modules
// takes seconds, more on a loaded machine.
const startTimeout = 2 * time.Minute

// Server is a moto_server process on loopback.
type Server struct {
	url      string
	accounts atomic.Int64 // regions handed out by Account
}

var shared struct {
	once   sync.Once
	server *Server
	err    error
}

// Shared returns the test binary's moto_server, started on the first call
// (a failure to start is remembered and fails every later caller). It runs
// until the binary exits: the kernel kills it then (Linux; see
// childProcAttr), so no test stops it. It skips t when moto_server is not
// installed, or fails it under MOTO=required.
func Shared(t testing.TB) *Server {
	t.Helper()
	Tool.Require(t)
	shared.once.Do(func() { shared.server, shared.err = start() })
	if shared.err != nil {
		t.Fatalf("start moto_server: %v", shared.err)
	}
	return shared.server
}

// start launches moto_server on a free port, trying another port when the
// one picked was taken meanwhile.
func start() (*Server, error) {
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		s, err := launch(port)
		if err == nil {
			return s, nil
		}
		lastErr = fmt.Errorf("attempt %d, port %d: %w", attempt, port, err)
	}
	return nil, lastErr
}

func launch(port int) (*Server, error) {
	logFile, err := os.CreateTemp("", "moto_server-*.log")
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	cmd := exec.Command(Tool.Name, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), "MOTO_ALLOW_NONEXISTENT_REGION=true")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("run %s: %w", Tool.Name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logFile.Close() }()

	s := &Server{url: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(startTimeout)
	for {
		// moto's own API answers once every service is loaded.
		resp, err := client.Get(s.url + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("moto_server exited before answering (%v); its log: %s", err, logFile.Name())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("no answer within %s; its log: %s", startTimeout, logFile.Name())
		}
	}
}

// URL is the server's endpoint, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// Account is an empty AWS account of the shared moto_server for one test: a
// region no other Account has.
type Account struct {
	// Region is the account's own region name.
	Region string
	// Config is an AWS SDK configuration for the account (static
	// credentials, one attempt per call, no retries), with Endpoint as its
	// base endpoint.
	Config aws.Config
	// Endpoint is where Config sends its calls: the moto_server, or a
	// Proxy in front of it.
	Endpoint string
}

// Account returns an AWS account that starts empty, talking to the server
// directly.
func (s *Server) Account(t testing.TB) *Account {
	t.Helper()
	n := s.accounts.Add(1)
	// A name of the shape of a real region, which moto accepts with
	// MOTO_ALLOW_NONEXISTENT_REGION; the test's name would not fit.
	region := fmt.Sprintf("us-test-%d", n)
	return newAccount(region, s.url)
}

// freshConnections is the HTTP client of every test account: a new
// loopback connection per call. A fixture's CreateUsagePlan once failed
// reading the body of moto_server's 201 on a reused connection ("use of
// closed network connection"), and with RetryMaxAttempts 1 (so that a test
// sees every call exactly once) nothing retried it. Reusing no connection
// takes that race away; a loopback dial per call costs the tests nothing
// they measure.
var freshConnections = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func newAccount(region, endpoint string) *Account {
	return &Account{
		Region:   region,
		Endpoint: endpoint,
		Config: aws.Config{
			Region:           region,
			BaseEndpoint:     aws.String(endpoint),
			Credentials:      credentials.NewStaticCredentialsProvider("AKIDMOTOTEST", "moto-test-secret", ""),
			RetryMaxAttempts: 1,
			HTTPClient:       freshConnections,
		},
	}
}

// Env is the environment that points a process's AWS SDK at the account
// (the functions' own clients, built by config.LoadDefaultConfig), for a
// built function under the Lambda emulator or t.Setenv.
func (a *Account) Env() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL":      a.Endpoint,
		"AWS_REGION":            a.Region,
		"AWS_ACCESS_KEY_ID":     "AKIDMOTOTEST",
		"AWS_SECRET_ACCESS_KEY": "moto-test-secret",
		"AWS_SESSION_TOKEN":     "",
		// No shared config or credentials file of the machine's user.
		"AWS_CONFIG_FILE":             filepath.Join(os.TempDir(), "mototest-no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(os.TempDir(), "mototest-no-aws-credentials"),
	}
}

// fillContext is the context of the calls that fill an account.
func fillContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
