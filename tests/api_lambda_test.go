package tests

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// TestAPIFunctionUnderTheEmulator runs functions/api the way Lambda runs
// it: the bootstrap built for provided.al2023 (static, lambda.norpc) under
// the Runtime Interface Emulator, with a real redis-server, invoked with
// every events/api-*.json file.
func TestAPIFunctionUnderTheEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	srv := redistest.StartServer(t)
	const redisTimeout = 100 * time.Millisecond
	bootstrap := lambdatest.BuildBootstrap(t, "./functions/api")
	rie := lambdatest.StartRIE(t, bootstrap, apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS": "3/1m",
		"RATE_LIMIT_ROUTES":    "POST /auth/*=2/1m",
		"REDIS_TIMEOUT":        redisTimeout.String(),
	}))
	invoke := func(t *testing.T, event []byte) apitest.Response {
		t.Helper()
		raw, err := rie.Invoke(t, event)
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		return apitest.Parse(t, raw)
	}

	// Every event file a user can pass to `make invoke`, with what it gets
	// on its first invocation.
	files := []struct {
		name       string
		wantStatus int
		limited    bool
		headers    map[string]string
	}{
		{"api-rest-anonymous.json", http.StatusOK, true, map[string]string{"RateLimit": `"anonymous";r=2;t=`}},
		{"api-httpapi-v2.json", http.StatusOK, true, map[string]string{"RateLimit": `"anonymous";r=2;t=`}},
		{"api-rest-with-authorizer-context.json", http.StatusOK, true, map[string]string{"RateLimit": `"org";r=9876;t=41`, "X-RateLimit-Reset": "1795986041"}},
		{"api-login.json", http.StatusOK, true, map[string]string{"RateLimit": `"POST /auth/*";r=1;t=`}},
		{"api-quota.json", http.StatusOK, true, map[string]string{"RateLimit": `"anonymous";r=3;t=`}},
		// The HTTP API authorizer's answer for a fail-closed route Redis
		// could not decide: the function answers the contract's 503 itself.
		{"api-httpapi-v2-unavailable.json", http.StatusServiceUnavailable, false, map[string]string{"Retry-After": "1"}},
		{"api-malformed.json", http.StatusBadRequest, false, nil},
	}
	onDisk, err := filepath.Glob(filepath.Join("..", "events", "api-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, f := range files {
		covered[f.name] = true
	}
	for _, path := range onDisk {
		if !covered[filepath.Base(path)] {
			t.Errorf("events/%s is not invoked by this test", filepath.Base(path))
		}
	}

	t.Run("every event file", func(t *testing.T) {
		for i, f := range files {
			t.Run(f.name, func(t *testing.T) {
				resp := invoke(t, apitest.ReadEvent(t, f.name))
				if i == 0 {
					t.Logf("cold start: %v from emulator start to first response", time.Since(rie.Started).Round(time.Millisecond))
				}
				if resp.StatusCode != f.wantStatus {
					t.Fatalf("status %d, want %d; body %s", resp.StatusCode, f.wantStatus, resp.Body)
				}
				if f.limited {
					apitest.CheckRateLimitHeaders(t, resp)
				} else if resp.Header.Get("RateLimit") != "" {
					t.Fatalf("unlimited answer carries RateLimit %q", resp.Header.Get("RateLimit"))
				}
				if resp.StatusCode == http.StatusServiceUnavailable && resp.Body != string(contract.ServiceUnavailableBody(1)) {
					t.Errorf("503 body %s", resp.Body)
				}
				for name, prefix := range f.headers {
					if got := resp.Header.Get(name); !strings.HasPrefix(got, prefix) {
						t.Errorf("%s = %q, want %s...", name, got, prefix)
					}
				}
			})
		}
	})

	t.Run("the limit+1th request is a contract 429", func(t *testing.T) {
		event := apitest.ReadEvent(t, "api-rest-anonymous.json")
		for range 2 { // the first of 3 was spent above
			if resp := invoke(t, event); resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d within the limit", resp.StatusCode)
			}
		}
		apitest.Check429(t, invoke(t, event))
	})

	t.Run("the authorizer's decision is reused, not counted again", func(t *testing.T) {
		before := apitest.RedisKeyCount(t, srv)
		for range 5 {
			if resp := invoke(t, apitest.ReadEvent(t, "api-rest-with-authorizer-context.json")); resp.Header.Get("RateLimit-Remaining") != "9876" {
				t.Fatalf("RateLimit-Remaining %q, want the context's 9876", resp.Header.Get("RateLimit-Remaining"))
			}
		}
		if after := apitest.RedisKeyCount(t, srv); after != before {
			t.Fatalf("Redis keys went from %d to %d", before, after)
		}
	})

	t.Run("Redis stopped: login 503, other routes degrade, within the budget", func(t *testing.T) {
		srv.Stop()
		tests := []struct {
			event      string
			wantStatus int
		}{
			{"api-login.json", http.StatusServiceUnavailable},
			{"api-httpapi-v2.json", http.StatusOK},
			{"api-quota.json", http.StatusOK},
		}
		for _, tt := range tests {
			start := time.Now()
			resp := invoke(t, apitest.ReadEvent(t, tt.event))
			took := time.Since(start)
			t.Logf("%s: %d in %v", tt.event, resp.StatusCode, took.Round(time.Microsecond))
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s: status %d, want %d; %s", tt.event, resp.StatusCode, tt.wantStatus, resp.Body)
			}
			if tt.wantStatus == http.StatusServiceUnavailable {
				if resp.Header.Get("Retry-After") != "1" || resp.Body != string(contract.ServiceUnavailableBody(1)) {
					t.Fatalf("503: Retry-After %q, body %s", resp.Header.Get("Retry-After"), resp.Body)
				}
			} else {
				apitest.CheckRateLimitHeaders(t, resp)
			}
			if took > redisTimeout+testkit.BudgetSlack {
				t.Fatalf("%s answered in %v; budget REDIS_TIMEOUT %v + %v", tt.event, took, redisTimeout, testkit.BudgetSlack)
			}
		}
	})
}
