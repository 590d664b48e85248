package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// consumerMain is a program of another module, as a team adopting the
// library would write it: the short path (ratelimit.New, PerMinute) and
// the public middleware (httplimit.Limit). It answers requests from one
// client, prints each answer as a JSON line, waits for a line on stdin
// (the test stops Redis meanwhile), and answers more.
const consumerMain = `package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

func main() {
	gate, err := ratelimit.New(redis.NewClient(&redis.Options{Addr: os.Args[1]}))
	if err != nil {
		panic(err)
	}
	h := httplimit.Limit(gate, ratelimit.PerMinute(3), httplimit.Options{})(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	out := json.NewEncoder(os.Stdout)
	answer := func(remote string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		_ = out.Encode(map[string]any{"status": rec.Code, "headers": rec.Header(), "body": rec.Body.String()})
	}
	for range 4 {
		answer("192.0.2.1:1000")
	}
	_ = out.Encode(map[string]any{"status": 0})
	bufio.NewReader(os.Stdin).ReadString('\n')
	for range 20 {
		answer("192.0.2.9:1000")
	}
}
`

type consumerAnswer struct {
	Status  int                 `json:"status"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
}

// TestLibraryFromAnotherModule builds a program in a module outside the
// repository (a replace directive to it, the repository's go.sum, the
// module cache only: GOPROXY=off) that imports the public middleware and
// the short path, and runs it against a real redis-server: three requests
// admitted with the rate-limit headers, the fourth a 429 with Retry-After
// and the JSON body; with the server stopped the answers come from the
// local limit (X-RateLimit-Degraded), and nothing is printed on stderr
// (go-redis's logger printed a line per failed dial before New silenced
// it).
func TestLibraryFromAnotherModule(t *testing.T) {
	srv := redistest.StartServer(t)
	root, err := lambdatest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/consumer\n\ngo 1.26.0\n\n" +
		"require (\n\tgithub.com/redis/go-redis/v9 v9.23.0\n\tgithub.com/slidegate/slidegate v0.0.0\n)\n\n" +
		"replace github.com/slidegate/slidegate => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(consumerMain)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "consumer")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in a module outside the repository: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, bin, srv.Addr())
	var stderr strings.Builder
	run.Stderr = &stderr
	stdin, err := run.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	next := func() consumerAnswer {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the program stopped answering: %v; stderr: %s", lines.Err(), stderr.String())
		}
		var a consumerAnswer
		if err := json.Unmarshal(lines.Bytes(), &a); err != nil {
			t.Fatalf("answer %q: %v", lines.Text(), err)
		}
		return a
	}
	header := func(a consumerAnswer, name string) string {
		if v := a.Headers[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	for i := range 3 {
		a := next()
		if a.Status != 200 || header(a, "Ratelimit-Limit") != "3" || header(a, "Ratelimit-Remaining") != string(rune('2'-i)) {
			t.Errorf("request %d: %d, RateLimit-Limit %q, RateLimit-Remaining %q, want 200, 3, %d", i+1, a.Status, header(a, "Ratelimit-Limit"), header(a, "Ratelimit-Remaining"), 2-i)
		}
	}
	a := next()
	if a.Status != 429 || header(a, "Retry-After") == "" || header(a, "Ratelimit-Remaining") != "0" || !strings.Contains(a.Body, `"TOO_MANY_REQUESTS"`) {
		t.Errorf("request 4: %d, Retry-After %q, RateLimit-Remaining %q, body %s; want a 429 with the headers and the JSON body", a.Status, header(a, "Retry-After"), header(a, "Ratelimit-Remaining"), a.Body)
	}
	if marker := next(); marker.Status != 0 {
		t.Fatalf("expected the pause marker, got %+v", marker)
	}

	srv.Stop()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	admitted, denied := 0, 0
	for i := range 20 {
		a := next()
		if header(a, "X-Ratelimit-Degraded") != "true" {
			t.Errorf("Redis stopped, request %d: %d without X-RateLimit-Degraded", i+1, a.Status)
		}
		switch a.Status {
		case 200:
			admitted++
		case 429:
			denied++
		default:
			t.Errorf("Redis stopped, request %d: status %d", i+1, a.Status)
		}
	}
	// The local limit: ceil(3/10) = 1 per minute per process.
	if admitted != 1 || denied != 19 {
		t.Errorf("Redis stopped: %d admitted, %d denied, want the local limit's 1 and 19", admitted, denied)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("program: %v; stderr: %s", err, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("the program printed on stderr with Redis stopped:\n%s", stderr.String())
	}
}
