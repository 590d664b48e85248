package instance_test

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/apigw"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
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

// The cold start opens the first connection to Redis, reads the live
// controls on it (one read serves both the network controls and the
// identity controls) and, with no decision asked for, preloads the
// decisions' scripts a moment later; the first request's decision then
// costs one command on that connection, the script call, which finds its
// script loaded, and the controls' read is not made again within
// controls.Propagation. Also with the identity hash key configured, whose
// gate is built once the key is installed.
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
			started := time.Now()
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
			if coldCalls["hgetall"] != 1 {
				t.Errorf("cold start: %d reads of the controls, want 1: %v", coldCalls["hgetall"], coldCalls)
			}
			if coldCalls["evalsha"] != 0 || coldCalls["eval"] != 0 {
				t.Errorf("cold start decided something: %v", coldCalls)
			}
			if n := coldCalls["script|load"]; n != 7 {
				t.Errorf("cold start: %d SCRIPT LOADs, want 7 (the decisions' scripts, not the controlled ones): %v", n, coldCalls)
			}

			req := apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.20"}
			for i := range 3 {
				out, err := rt.Decide(context.Background(), req)
				if err != nil || !out.Result.Allowed || out.Kind != apigw.Allowed {
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
			// Three decisions within controls.Propagation of the cold
			// start's read: no read of the controls hash, three script
			// calls that found their script (the commands the script runs
			// are counted too). On a machine so slow that the read is
			// older than that, the first decision reads again.
			reads := diff["hgetall"]
			readAgain := time.Since(started) >= controls.Propagation && reads == 1
			if (reads != 0 && !readAgain) || diff["evalsha"] != 3 || diff["eval"] != 0 || diff["script|load"] != 0 || diff["hello"] != 0 || diff["ping"] != 0 {
				t.Errorf("three decisions made %v, want 3 evalsha and no hgetall, eval, SCRIPT LOAD, HELLO or PING", diff)
			}
			// INFO's own connection was there before; none was opened since.
			if acceptedAfter != accepted {
				t.Errorf("the decisions opened %d connections, want none (the cold start's are reused)", acceptedAfter-accepted)
			}
		})
	}
}

// A decision asked for right after the cold start is not made to share
// the CPU with the script preload: the preload starts once that decision
// has been answered. On a server that has never seen the scripts, the
// decision loads its own (EVALSHA, NOSCRIPT, then EVAL) before any SCRIPT
// LOAD, and the preload that follows loads the decisions' scripts. The
// server's MONITOR gives the order of the commands.
func TestScriptPreloadWaitsForTheFirstDecision(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lines := monitor(t, srv.Addr())
	// MONITOR is on once it shows a command sent after it.
	admin := srv.Client(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for on := false; !on; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("MONITOR ended")
			}
			on = strings.Contains(l, "monitor-on")
		case <-tick.C:
			if err := admin.Echo(ctx, "monitor-on").Err(); err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("MONITOR showed nothing")
		}
	}

	started := time.Now()
	rt, logs := newRuntime(t, srv.URL(), nil)
	out, err := rt.Decide(context.Background(), apigw.Request{Method: "GET", Path: "/v1/items", SourceIP: "198.51.100.21"})
	if err != nil || !out.Result.Allowed {
		t.Fatalf("decision: %+v, %v; logs:\n%s", out, err, logs)
	}
	decided := time.Since(started)
	if err := rt.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	// The last SCRIPT LOAD is followed by this, so every command before
	// it has been shown.
	if err := admin.Echo(ctx, "monitor-off").Err(); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for off := false; !off; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("MONITOR ended")
			}
			if strings.Contains(l, "monitor-off") {
				off = true
				continue
			}
			// 1700000000.000000 [0 127.0.0.1:4242] "verb" "arg" ...
			if _, rest, ok := strings.Cut(l, "] \""); ok {
				verb, args, _ := strings.Cut(rest, "\"")
				verb = strings.ToLower(verb)
				if verb == "script" && strings.HasPrefix(strings.ToLower(args), " \"load") {
					verb = "script load"
				}
				verbs = append(verbs, verb)
			}
		case <-ctx.Done():
			t.Fatal("MONITOR did not show the end")
		}
	}
	firstEval, firstLoad, loads := -1, -1, 0
	for i, v := range verbs {
		switch v {
		case "eval":
			if firstEval < 0 {
				firstEval = i
			}
		case "script load":
			loads++
			if firstLoad < 0 {
				firstLoad = i
			}
		}
	}
	if loads != 7 {
		t.Errorf("%d SCRIPT LOADs, want 7 (the preload, after the decision): %v", loads, verbs)
	}
	if decided < 50*time.Millisecond && (firstEval < 0 || firstLoad < firstEval) {
		// Well within the preload's delay: only the decision can have
		// started the preload.
		t.Errorf("the decision's EVAL at %d, the first SCRIPT LOAD at %d, want the EVAL first: %v", firstEval, firstLoad, verbs)
	}
}

// monitor sends MONITOR on a connection of its own to the server at addr
// and returns the lines it shows, until the test ends.
func monitor(t *testing.T, addr string) <-chan string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 10_000)
	go func() {
		defer close(lines)
		r := bufio.NewReader(conn)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			select {
			case lines <- strings.TrimRight(l, "\r\n"):
			default: // a test that stopped reading
			}
		}
	}()
	return lines
}
