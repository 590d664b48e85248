package app_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/edge"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
)

// commandCalls is each command's calls= from INFO commandstats, and the
// connections the server has accepted so far.
func commandCalls(t *testing.T, admin *redis.Client) (map[string]int64, int64) {
	t.Helper()
	ctx := context.Background()
	stats, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for line := range strings.SplitSeq(stats, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				calls[name], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	info, err := admin.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var accepted int64
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			accepted, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return calls, accepted
}

// The cold start opens the first connection to Redis and preloads the
// decisions' scripts before the first request, and that request's
// decision costs two commands on that connection: one read of the live
// controls, which serves both the network controls and the identity
// controls, and the script call, which finds its script loaded. Also
// with the identity hash key configured, whose gate is built once the key
// is installed.
func TestFirstDecisionOnAWarmConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra map[string]string
	}{
		{"no identity hash key", nil},
		{"identity hash key", map[string]string{"RATE_LIMIT_HASH_KEY": "a-test-identity-hash-key-of-32-bytes-or-more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			admin := srv.Client(t)
			before, _ := commandCalls(t, admin)
			rt, logs := newRuntime(t, srv.URL(), tc.extra)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := rt.WaitLoaded(ctx); err != nil {
				t.Fatal(err)
			}
			coldCalls, accepted := commandCalls(t, admin)
			for name, n := range before {
				coldCalls[name] -= n
			}
			if coldCalls["ping"] != 1 {
				t.Errorf("cold start: %d PINGs, want 1 (the first connection, opened in the background): %v", coldCalls["ping"], coldCalls)
			}
			if coldCalls["hgetall"] != 0 || coldCalls["evalsha"] != 0 || coldCalls["eval"] != 0 {
				t.Errorf("cold start read or decided something: %v", coldCalls)
			}
			if n := coldCalls["script|load"]; n != 8 {
				t.Errorf("cold start: %d SCRIPT LOADs, want 8 (the decisions' scripts, not the controlled ones): %v", n, coldCalls)
			}

			req := edge.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.20"}
			for i := range 3 {
				out, err := rt.Decide(context.Background(), req)
				if err != nil || !out.Result.Allowed || out.Kind != edge.Allowed {
					t.Fatalf("decision %d: %+v, %v; logs:\n%s", i+1, out, err, logs)
				}
			}
			calls, acceptedAfter := commandCalls(t, admin)
			diff := map[string]int64{}
			for name, n := range calls {
				if d := n - coldCalls[name] - before[name]; d != 0 {
					diff[name] = d
				}
			}
			// Three decisions within one ControlPropagation: one read of
			// the controls hash, three script calls that found their
			// script (the commands the script runs are counted too).
			if diff["hgetall"] != 1 || diff["evalsha"] != 3 || diff["eval"] != 0 || diff["script|load"] != 0 || diff["hello"] != 0 || diff["ping"] != 0 {
				t.Errorf("three decisions made %v, want 1 hgetall and 3 evalsha, and no eval, SCRIPT LOAD, HELLO or PING", diff)
			}
			// INFO's own connection was there before; none was opened since.
			if acceptedAfter != accepted {
				t.Errorf("the decisions opened %d connections, want none (the cold start's are reused)", acceptedAfter-accepted)
			}
		})
	}
}
