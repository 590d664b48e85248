package tests

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/cmd/localapi/server"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// TestSlidegateInspectResolvesAsTheFunctions (issue 20, hole 6): inspect
// resolves a caller through internal/policy as make local's functions do:
// the demo key local-pro-key is counted on plan pro (--local reads the
// stage with make local's defaults), an anonymous caller on its network's
// plan. Before: inspect showed the org tier (or the anonymous tier) with
// 0 used, and its header said (org).
func TestSlidegateInspectResolvesAsTheFunctions(t *testing.T) {
	topologies := []struct {
		name  string
		redis func(t *testing.T) map[string]string
	}{
		{"single node", func(t *testing.T) map[string]string {
			return map[string]string{"REDIS_URL": redistest.StartServer(t).URL()}
		}},
		{"cluster", func(t *testing.T) map[string]string {
			addrs := redistest.StartCluster(t, 3, 0).Addrs()
			return map[string]string{"REDIS_URL": "redis://" + addrs[0], "REDIS_CLUSTER": "true"}
		}},
	}
	lambdatest.BuildBootstrap(t, "./cmd/slidegate")
	for _, topo := range topologies {
		t.Run(topo.name, func(t *testing.T) {
			env := topo.redis(t)
			env["RATE_LIMIT_NETWORKS"] = "127.0.0.2=pro"
			srv, err := server.Start(context.Background(), server.Config{
				Addr: "127.0.0.1:0", Stage: "dev", TemplatePath: "../template.yaml", SamconfigPath: "../samconfig.toml",
				Getenv: func(name string) string { return env[name] },
				Logger: slog.New(slog.DiscardHandler), FunctionLogger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			})
			for range 3 {
				req, _ := http.NewRequest("GET", "http://"+srv.Addr()+"/v1/items", nil)
				req.Header.Set("x-api-key", server.DemoProAPIKey)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("GET /v1/items with the pro key: %d", resp.StatusCode)
				}
			}

			r := runSlidegate(t, env, "", "inspect", "--stage", "dev", "--local", "--json", "--api-key", server.DemoProAPIKey)
			var in struct {
				Tier, Plan string
				Limits     []struct {
					Name string
					Used int64
				}
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &in) != nil {
				t.Fatalf("inspect --local --api-key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			used := map[string]int64{}
			for _, l := range in.Limits {
				used[l.Name] = l.Used
			}
			if in.Tier != "org" || in.Plan != "pro" || used["pro-1s"] != 3 || used["pro-1m"] != 3 || used["pro-1d"] != 3 {
				t.Errorf("inspect --local --api-key %s: tier %s plan %q used %v; want org on plan pro, 3 used of each", server.DemoProAPIKey, in.Tier, in.Plan, used)
			}
			table := runSlidegate(t, env, "", "inspect", "--stage", "dev", "--local", "--api-key", server.DemoProAPIKey)
			if !strings.Contains(table.stdout, "(org, plan pro)") || !containsFields(table.stdout, "pro-1m", "100/1m", "sliding-window", "3", "97") {
				t.Errorf("inspect table: exit %d\n%s%s", table.code, table.stdout, table.stderr)
			}
			// An anonymous caller is counted on its network's plan.
			anon := runSlidegate(t, env, "", "inspect", "--stage", "dev", "--local", "--ip", "127.0.0.2")
			if !strings.Contains(anon.stdout, "(anonymous, plan pro)") || !strings.Contains(anon.stdout, "network: plan pro") || !strings.Contains(anon.stdout, "pro-1s") {
				t.Errorf("inspect --ip on a network's plan: exit %d\n%s%s", anon.code, anon.stdout, anon.stderr)
			}
		})
	}
}
