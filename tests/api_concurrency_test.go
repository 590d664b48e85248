package tests

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/internal/apihandler"
	"github.com/slidegate/slidegate/internal/instance"
	"github.com/slidegate/slidegate/internal/observe"
	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/apitest"
	"github.com/slidegate/slidegate/internal/testkit/faultproxy"
	"github.com/slidegate/slidegate/internal/testkit/lambdatest"
	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/httplimit/contract"
)

// apiSlowEvent is a REST event of GET /v1/slow?ms=ms from sourceIP.
func apiSlowEvent(t testing.TB, sourceIP string, ms int) []byte {
	t.Helper()
	return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
		e.Resource, e.Path = "/v1/slow", "/v1/slow"
		e.RequestContext.Path = "/prod/v1/slow"
		e.QueryStringParameters = map[string]string{"ms": strconv.Itoa(ms)}
		e.MultiValueQueryStringParameters = map[string][]string{"ms": {strconv.Itoa(ms)}}
		e.RequestContext.Identity.SourceIP = sourceIP
	})
}

// apiHealthEvent is a REST event of GET /health: no limit, for warming an
// instance up.
func apiHealthEvent(t testing.TB) []byte {
	t.Helper()
	return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
		e.Resource, e.Path = "/health", "/health"
	})
}

// slotSets are the keys of the in-flight slot sets on a server.
func slotSets(t testing.TB, c *redis.Client) []string {
	t.Helper()
	keys, err := c.Keys(context.Background(), "*:cc:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestAPIFunctionInFlightLimitUnderTheEmulator runs N+5 slow requests of
// one caller at once through the API function under the emulator, each on
// an instance of its own as Lambda would: exactly N run, the other 5 are
// answered 429 while those N are still running, and another caller is
// unaffected. When they end, every slot is given back.
func TestAPIFunctionInFlightLimitUnderTheEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	t.Parallel()
	const (
		maxInFlight = 2
		over        = 5
		callerA     = "198.51.100.20"
		callerB     = "198.51.100.21"
	)
	srv := redistest.StartServer(t)
	admin := srv.Client(t)
	bootstrap := lambdatest.BuildBootstrap(t, "./functions/api")
	env := apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS":   "1000/1m",
		"RATE_LIMIT_CONCURRENCY": "anonymous=" + strconv.Itoa(maxInFlight),
	})
	instances := make([]*lambdatest.RIE, maxInFlight+over+1)
	var wg sync.WaitGroup
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			instances[i] = lambdatest.StartRIE(t, bootstrap, env)
		}()
	}
	wg.Wait()
	for _, rie := range instances { // cold starts out of the way
		if _, err := rie.Invoke(t, apiHealthEvent(t)); err != nil {
			t.Fatal(err)
		}
	}

	type answer struct {
		resp apitest.Response
		at   time.Time
	}
	// A round holds the N slots for hold; it is tried again, holding
	// longer, when the machine was too slow to send every request while
	// the first N still ran (a 200 came back before some 429).
	for hold := 1500; ; hold *= 2 {
		answers := make([]answer, maxInFlight+over)
		var other answer
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				raw, err := instances[i].InvokeContext(context.Background(), apiSlowEvent(t, callerA, hold))
				if err != nil {
					t.Errorf("invoke: %v", err)
					return
				}
				answers[i] = answer{apitest.Parse(t, raw), time.Now()}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			raw, err := instances[len(instances)-1].InvokeContext(context.Background(), apiSlowEvent(t, callerB, 0))
			if err != nil {
				t.Errorf("invoke: %v", err)
				return
			}
			other = answer{apitest.Parse(t, raw), time.Now()}
		}()
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		var ran, refused int
		var firstDone, lastRefused time.Time
		for _, a := range answers {
			switch a.resp.StatusCode {
			case http.StatusOK:
				ran++
				if firstDone.IsZero() || a.at.Before(firstDone) {
					firstDone = a.at
				}
			case http.StatusTooManyRequests:
				refused++
				if a.at.After(lastRefused) {
					lastRefused = a.at
				}
				if got, want := a.resp.Body, string(contract.TooManyInFlightBody(1)); got != want {
					t.Fatalf("429 body %s, want %s", got, want)
				}
				if got := a.resp.Header.Get("Retry-After"); got != "1" {
					t.Fatalf("429 Retry-After %q, want the 1s hint", got)
				}
				if a.resp.Header.Get("RateLimit") == "" {
					t.Fatal("429 of the in-flight limit lost the rate limit's RateLimit header")
				}
			default:
				t.Fatalf("status %d: %s", a.resp.StatusCode, a.resp.Body)
			}
		}
		if other.resp.StatusCode != http.StatusOK {
			t.Fatalf("another caller's request: status %d, %s; want it unaffected", other.resp.StatusCode, other.resp.Body)
		}
		if lastRefused.Before(firstDone) && other.at.Before(firstDone) {
			if ran != maxInFlight || refused != over {
				t.Fatalf("%d ran and %d were refused, want exactly %d and %d", ran, refused, maxInFlight, over)
			}
			t.Logf("held %d ms: %d ran, %d refused while they ran", hold, ran, refused)
			break
		}
		if ran+refused != maxInFlight+over || hold >= 12000 {
			t.Fatalf("%d ran and %d were refused, some after the first ended, holding %d ms", ran, refused, hold)
		}
		t.Logf("holding %d ms was too short on this machine (a request ended before every other was answered); again", hold)
	}
	if keys := slotSets(t, admin); len(keys) != 0 {
		t.Fatalf("slot sets left after every request ended: %v", keys)
	}
}

// TestAPIFunctionInFlightSlotOfAKilledInstance kills, for real, the
// instance whose request holds a caller's only slot: the slot stays taken
// until its lease ends (RATE_LIMIT_CONCURRENCY_LEASE), measured on the
// Redis clock, and is free again then.
func TestAPIFunctionInFlightSlotOfAKilledInstance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	t.Parallel()
	const caller = "198.51.100.30"
	srv := redistest.StartServer(t)
	admin := srv.Client(t)
	bootstrap := lambdatest.BuildBootstrap(t, "./functions/api")
	env := apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS":         "1000/1m",
		"RATE_LIMIT_CONCURRENCY":       "anonymous=1",
		"RATE_LIMIT_CONCURRENCY_LEASE": "6s",
	})
	holder := lambdatest.StartRIE(t, bootstrap, env)
	prober := lambdatest.StartRIE(t, bootstrap, env)
	for _, rie := range []*lambdatest.RIE{holder, prober} {
		if _, err := rie.Invoke(t, apiHealthEvent(t)); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		// Killed mid-request: its error is the point.
		_, _ = holder.InvokeContext(context.Background(), apiSlowEvent(t, caller, 10000))
	}()
	ctx := context.Background()
	var leaseEnd time.Time
	for deadline := time.Now().Add(20 * time.Second); ; {
		if keys := slotSets(t, admin); len(keys) == 1 {
			slots, err := admin.ZRangeWithScores(ctx, keys[0], 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(slots) == 1 {
				leaseEnd = time.UnixMicro(int64(slots[0].Score))
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder's request never took its slot")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// SIGKILL to the function mid-request: no release, no line more.
	holder.KillFunction(t)
	holder.Stop()

	redisNow := func() time.Time {
		now, err := admin.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	probe := func() apitest.Response {
		raw, err := prober.InvokeContext(ctx, apiSlowEvent(t, caller, 0))
		if err != nil {
			t.Fatal(err)
		}
		return apitest.Parse(t, raw)
	}
	if before := redisNow(); !before.Before(leaseEnd) {
		// The machine took past the lease end to kill the holder: "not
		// before" cannot be seen here (pkg/ratelimit's lease test shows it
		// on a stepped clock), but the killed holder's slot must be free.
		if resp := probe(); resp.StatusCode != http.StatusOK {
			t.Fatalf("past the killed holder's lease end %v: status %d, want 200 (its slot leaked)", leaseEnd, resp.StatusCode)
		}
		t.Logf("the kill took past the lease end %v; checked only that the slot is free", leaseEnd)
		return
	}
	if resp := probe(); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("right after the kill: status %d, want 429 (the slot is held until its lease ends)", resp.StatusCode)
	}
	refusals := 1
	for {
		resp := probe()
		after := redisNow()
		if resp.StatusCode == http.StatusOK {
			if after.Before(leaseEnd) {
				t.Fatalf("admitted at %v, before the killed holder's lease end %v", after, leaseEnd)
			}
			t.Logf("refused %d times, then admitted at the lease end", refusals)
			break
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
		if after.After(leaseEnd.Add(10 * time.Second)) {
			t.Fatalf("still refused %v after the lease end: the killed holder's slot leaked", after.Sub(leaseEnd))
		}
		refusals++
		time.Sleep(100 * time.Millisecond)
	}
}

// apiAuthorizedEvent is a REST event of method and path from sourceIP
// (a POST with events/api-login.json's JSON body) whose rate limits the authorizer already decided (allowed, its context
// in the event): the API function counts nothing for them, so its only
// Redis call is the in-flight acquire.
func apiAuthorizedEvent(t testing.TB, sourceIP, method, path string, query map[string]string) []byte {
	t.Helper()
	return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
		e.HTTPMethod, e.Resource, e.Path = method, path, path
		e.RequestContext.HTTPMethod = method
		e.RequestContext.Path = "/prod" + path
		e.PathParameters = nil
		e.QueryStringParameters = query
		e.MultiValueQueryStringParameters = nil
		for k, v := range query {
			if e.MultiValueQueryStringParameters == nil {
				e.MultiValueQueryStringParameters = map[string][]string{}
			}
			e.MultiValueQueryStringParameters[k] = []string{v}
		}
		e.RequestContext.Identity.SourceIP = sourceIP
		if method == http.MethodPost {
			apitest.SetRESTHeader(e, "Content-Type", "application/json")
			e.Body = `{"username":"alice","password":"correct horse battery staple"}`
		}
		e.RequestContext.Authorizer = map[string]any{
			"principalId": "anonymous:" + sourceIP, "tier": "anonymous",
			"limit": "1000", "remaining": "999", "reset": "1", "window": "60",
			"name": "anonymous", "policy": `"anonymous";q=1000;w=60`, "resetAt": "1795986001",
		}
	})
}

// inFlightFaultBound bounds an answer while Redis is down or hangs: the
// contract promises REDIS_TIMEOUT (100ms here) plus the time to notice it
// has passed; the bound is far above that, for an emulator round trip on a
// loaded shared machine, and far below what a hanging call would take.
const inFlightFaultBound = 10 * time.Second

// TestAPIFunctionInFlightWhenRedisFails runs the API function under the
// emulator with an in-flight limit while Redis fails for real (the
// redis-server process stopped, or black-holed by a fault proxy: every
// byte swallowed, no answer, no close). On the fail-closed route (POST
// /auth/login, whose rate limits the authorizer already decided, so the
// acquire is the only Redis call) the answer is the contract's 503 with
// Retry-After, and the log line names the in-flight limit; on a fail-open
// route the request runs, counted in flight by the instance. Each answer
// comes within a bound, never after a hanging call.
func TestAPIFunctionInFlightWhenRedisFails(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap and the emulator")
	}
	t.Parallel()
	const caller = "198.51.100.40"
	bootstrap := lambdatest.BuildBootstrap(t, "./functions/api")
	cases := []struct {
		name string
		// start returns the REDIS_URL the function dials and the fault.
		start func(t *testing.T, srv *redistest.Server) (url string, inject func())
	}{
		{"redis-server stopped", func(t *testing.T, srv *redistest.Server) (string, func()) {
			return srv.URL(), srv.Stop
		}},
		{"black-holed", func(t *testing.T, srv *redistest.Server) (string, func()) {
			proxy := faultproxy.StartTest(t, srv.Addr())
			return proxy.URL(), func() { proxy.SetModeTest(t, faultproxy.BlackHole) }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t)
			admin := srv.Client(t)
			url, inject := c.start(t, srv)
			rie := lambdatest.StartRIE(t, bootstrap, apitest.Env(url, map[string]string{
				"RATE_LIMIT_ANONYMOUS":   "1000/1m",
				"RATE_LIMIT_CONCURRENCY": "anonymous=2",
			}))
			login := apiAuthorizedEvent(t, caller, http.MethodPost, "/auth/login", nil)
			slow := apiAuthorizedEvent(t, caller, http.MethodGet, "/v1/slow", map[string]string{"ms": "0"})
			invoke := func(event []byte) (apitest.Response, time.Duration) {
				t.Helper()
				start := time.Now()
				raw, err := rie.Invoke(t, event)
				took := time.Since(start)
				if err != nil {
					t.Fatalf("invoke: %v", err)
				}
				return apitest.Parse(t, raw), took
			}
			for _, event := range [][]byte{login, slow} {
				if resp, _ := invoke(event); resp.StatusCode != http.StatusOK {
					t.Fatalf("Redis healthy: status %d, %s", resp.StatusCode, resp.Body)
				}
			}
			if keys := slotSets(t, admin); len(keys) != 0 {
				t.Fatalf("slot sets left after the healthy requests: %v", keys)
			}

			inject()
			// Three of each: the first meets the fault, the later ones may
			// meet the open circuit breaker; both answer the same.
			var worst time.Duration
			for range 3 {
				resp, took := invoke(login)
				worst = max(worst, took)
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("fail-closed route, Redis down: status %d, %s; want 503", resp.StatusCode, resp.Body)
				}
				if got, want := resp.Body, string(contract.ServiceUnavailableBody(1)); got != want {
					t.Fatalf("503 body %s, want %s", got, want)
				}
				if got := resp.Header.Get("Retry-After"); got != "1" {
					t.Fatalf("503 Retry-After %q, want 1", got)
				}
				if took > inFlightFaultBound {
					t.Fatalf("fail-closed answer took %v, want within %v", took, inFlightFaultBound)
				}

				resp, took = invoke(slow)
				worst = max(worst, took)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("fail-open route, Redis down: status %d, %s; want 200 from the instance's own count", resp.StatusCode, resp.Body)
				}
				if took > inFlightFaultBound {
					t.Fatalf("fail-open answer took %v, want within %v", took, inFlightFaultBound)
				}
			}
			rie.WaitLogsContaining(`"msg":"in-flight limit undecided on a fail-closed route"`)
			t.Logf("worst answer while Redis was down: %v", worst)
		})
	}
}

// TestAPIFunctionInFlightFailOpenCountsPerInstance: with Redis stopped, a
// fail-open route's in-flight limit is counted by the instance alone, its
// limit divided by RATE_LIMIT_FALLBACK_INSTANCES and rounded up (5/2: 3).
// N+2 slow requests of one caller at once through one in-process API
// function: exactly N run, 2 are answered 429 while they run, with the
// in-flight body, and the decision lines say degraded. The count is given
// back: afterwards N run again. (Under the emulator an instance runs one
// request at a time, as Lambda's do, so the local count can only be seen
// refusing in process: a local server, or an integration of one's own.)
func TestAPIFunctionInFlightFailOpenCountsPerInstance(t *testing.T) {
	t.Parallel()
	const (
		localMax = 3
		over     = 2
		caller   = "198.51.100.41"
	)
	srv := redistest.StartServer(t)
	var logs testkit.Buffer
	api := apitest.StartLogging(t, apitest.Env(srv.URL(), map[string]string{
		"RATE_LIMIT_ANONYMOUS":          "1000/1m",
		"RATE_LIMIT_CONCURRENCY":        "anonymous=5",
		"RATE_LIMIT_FALLBACK_INSTANCES": "2",
	}), &logs)
	srv.Stop()

	round := func(n, hold int) (ran, refused int, inOrder bool) {
		type answer struct {
			raw []byte
			at  time.Time
		}
		answers := make([]answer, n)
		event := apiSlowEvent(t, caller, hold)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out, err := api.Invoke(context.Background(), event)
				if err != nil {
					t.Errorf("invoke: %v", err)
					return
				}
				raw, err := json.Marshal(out)
				if err != nil {
					t.Errorf("marshal response: %v", err)
					return
				}
				answers[i] = answer{raw, time.Now()}
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		var firstDone, lastRefused time.Time
		for _, a := range answers {
			resp := apitest.Parse(t, a.raw)
			switch resp.StatusCode {
			case http.StatusOK:
				ran++
				if firstDone.IsZero() || a.at.Before(firstDone) {
					firstDone = a.at
				}
			case http.StatusTooManyRequests:
				refused++
				if a.at.After(lastRefused) {
					lastRefused = a.at
				}
				if got, want := resp.Body, string(contract.TooManyInFlightBody(1)); got != want {
					t.Fatalf("429 body %s, want %s", got, want)
				}
			default:
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
		}
		return ran, refused, lastRefused.Before(firstDone)
	}
	for hold := 1000; ; hold *= 2 {
		ran, refused, inOrder := round(localMax+over, hold)
		if inOrder {
			if ran != localMax || refused != over {
				t.Fatalf("%d ran and %d were refused, want exactly %d and %d", ran, refused, localMax, over)
			}
			break
		}
		if hold >= 8000 {
			t.Fatalf("%d ran and %d were refused, some after the first ended, holding %d ms", ran, refused, hold)
		}
		t.Logf("holding %d ms was too short on this machine; again", hold)
	}
	denials := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"limitKind":"concurrency"`) {
			denials++
			if !strings.Contains(line, `"degraded":true`) {
				t.Fatalf("in-flight denial line without degraded:true: %s", line)
			}
		}
	}
	if denials == 0 {
		t.Fatalf("no in-flight denial line in the logs:\n%s", logs.String())
	}
	// Every slot of the local count was given back.
	if ran, refused, _ := round(localMax, 0); ran != localMax || refused != 0 {
		t.Fatalf("afterwards: %d ran and %d were refused, want all %d to run", ran, refused, localMax)
	}
}

// TestAPIFunctionResolvesTheCallerOnce: a request under an in-flight
// limit has its caller resolved once, for its rate decision and its slots
// alike. Each resolution of a caller whose source address is not an IP
// address logs one line (every line written: sampling off), so the lines
// count the resolutions: exactly one per request, with or without an
// in-flight limit, and when the authorizer decided the rate limits (the
// acquire is then the only resolution).
func TestAPIFunctionResolvesTheCallerOnce(t *testing.T) {
	t.Parallel()
	const (
		requests    = 5
		invalidLine = `"msg":"source IP is not an IP address`
	)
	srv := redistest.StartServer(t)
	items := func(authorized bool) []byte {
		if authorized {
			return apiAuthorizedEvent(t, "not-an-ip", http.MethodGet, "/v1/items", nil)
		}
		return apitest.RESTEvent(t, func(e *events.APIGatewayProxyRequest) {
			e.RequestContext.Identity.SourceIP = "not-an-ip"
		})
	}
	cases := []struct {
		name        string
		concurrency string
		authorized  bool
	}{
		{"in-flight limit", "anonymous=2", false},
		{"in-flight limit, authorizer's decision", "anonymous=2", true},
		{"no in-flight limit", "none", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs testkit.Buffer
			env := apitest.Env(srv.URL(), map[string]string{
				"RATE_LIMIT_ANONYMOUS":   "1000/1m",
				"RATE_LIMIT_CONCURRENCY": c.concurrency,
			})
			logger := slog.New(slog.NewJSONHandler(&logs, nil))
			rt, err := instance.NewRuntime(context.Background(), func(k string) string { return env[k] }, instance.Options{
				Logger:              logger,
				Metrics:             io.Discard,
				DecisionLogSampling: observe.LogSampling{PerSecond: -1},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rt.Close() })
			api := apihandler.NewLambdaHandler(apihandler.New(rt, apihandler.Options{Logger: logger}), logger)
			for range requests {
				if resp := apitest.Invoke(t, api, items(c.authorized)); resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
				}
			}
			if got := strings.Count(logs.String(), invalidLine); got != requests {
				t.Fatalf("%d requests resolved their caller %d times, want once each", requests, got)
			}
		})
	}
}
