package apihandler_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/slidegate/slidegate/internal/testkit/apitest"
)

// TestAPIFailureLogNamesThePathOnce: when Redis cannot decide a fail-closed
// request, the API function's log line names the request once, clipped,
// however long its path: a caller chooses the path, may put a token in it,
// and may make it 64 KiB long. The line's error is the Runtime's (which
// names the route, clipped) and is not wrapped again with the route.
func TestAPIFailureLogNamesThePathOnce(t *testing.T) {
	// A port nothing listens on: every decision finds Redis unavailable.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "redis://" + l.Addr().String()
	_ = l.Close()

	const marker = "reset-token-Qz7Lw"
	cases := []struct {
		name, path string
	}{
		{"secret segment", "/auth/" + marker},
		{"64 KiB path", "/auth/" + marker + strings.Repeat("x", 64<<10)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := apitest.StartLogging(t, apitest.Env(dead, nil), &logs)
			resp := apitest.Invoke(t, h, apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
				e.HTTPMethod, e.Path, e.Resource = http.MethodPost, c.path, "/{proxy+}"
				e.PathParameters = nil
			}))
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503 (fail-closed route, Redis down): %s", resp.StatusCode, resp.Body)
			}
			var line map[string]any
			var raw string
			sc := bufio.NewScanner(&logs)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var rec map[string]any
				if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "rate limit undecided on a fail-closed route" {
					line, raw = rec, sc.Text()
				}
			}
			if line == nil {
				t.Fatalf("no middleware failure line in the logs:\n%s", logs.String())
			}
			errText, _ := line["error"].(string)
			if n := strings.Count(errText, marker); n > 1 {
				t.Errorf("the error names the path %d times: %s", n, errText)
			}
			if n := strings.Count(raw, marker); n > 2 {
				t.Errorf("the line names the path %d times, want the route and the Runtime's error at most", n)
			}
			if len(raw) > 2048 {
				t.Errorf("the failure line is %d bytes long: the path is not clipped", len(raw))
			}
		})
	}
}
