package tests

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/deployconfig"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// TestReadmeTour runs the tour of docs/tour.md, and the README's three
// curls, against `make local`'s server (the dev stage, the embedded Redis,
// the demo keys, as `make local` starts it) and compares what it answers
// with what they say: status codes, and the header names of the 429 blocks
// (their values depend on the moment in the window). Requests the tour
// sends in one run of curl are sent here back to back too.
func TestReadmeTour(t *testing.T) {
	raw, err := os.ReadFile("../docs/tour.md")
	if err != nil {
		t.Fatal(err)
	}
	tour := string(raw)
	raw, err = os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	if n := strings.Count(readme, "\n"); n > 150 {
		t.Errorf("README.md has %d lines; it fits on a screen or two at 150", n)
	}
	local := func(t *testing.T) *localAPI {
		return startLocalAPIWith(t, "dev", "", false, map[string]string{"API_KEY_HASHES": "", "JWT_ISSUER": "", "JWT_AUDIENCE": "", "JWT_HS256_SECRET": ""})
	}

	for _, doc := range []struct{ name, text string }{{"docs/tour.md", tour}, {"README.md", readme}} {
		t.Run(doc.name+": thirty-one requests, then curl -i", func(t *testing.T) {
			api := local(t)
			if !strings.Contains(doc.text, "curl -s -o /dev/null -w '%{http_code} ' 'http://127.0.0.1:3000/v1/items?n=[1-31]'; echo") {
				t.Errorf("%s no longer sends the thirty-one requests in one run of curl", doc.name)
			}
			codes, block := tourBlock(t, doc.text, "as curl prints it against `make local`")
			var got []string
			for range 31 {
				got = append(got, strconv.Itoa(api.do(t, "GET", "/v1/items", nil).status))
			}
			if want := strings.Fields(codes); !slices.Equal(got, want) {
				t.Errorf("the run printed %v, %s %v", got, doc.name, want)
			}
			tourCompare(t, api.do(t, "GET", "/v1/items", nil), block)
			if doc.name == "README.md" {
				if r := api.do(t, "GET", "/v1/items", map[string]string{"x-api-key": "local-demo-key"}); r.status != http.StatusOK || r.header.Get("RateLimit-Limit") != "10000" ||
					!strings.Contains(readme, "answers `200` with `RateLimit-Limit: 10000`") {
					t.Errorf("the README's third curl: %d, RateLimit-Limit %q; it says 200 and 10000", r.status, r.header.Get("RateLimit-Limit"))
				}
				return
			}
			// After it, a bogus key is answered 429, as the tour warns.
			if r := api.do(t, "GET", "/v1/items", map[string]string{"x-api-key": "bogus"}); r.status != http.StatusTooManyRequests {
				t.Errorf("bogus key after the tour: %d, the tour says 429 once the budget is spent", r.status)
			}
		})
	}

	t.Run("plan pro: twenty-five and one more in one run of curl", func(t *testing.T) {
		api := local(t)
		codes, block := tourBlock(t, tour, "Twenty pass within the second, then the burst limit answers")
		pro := map[string]string{"x-api-key": "local-pro-key"}
		var got []string
		for range 25 {
			got = append(got, strconv.Itoa(api.do(t, "GET", "/v1/items", pro).status))
		}
		r := api.do(t, "GET", "/v1/items", pro)
		admitted := slices.Index(got, "429")
		// Back to back they land within the second; a machine so loaded
		// that they spread past it admits more, never fewer (the tour
		// says so).
		if admitted >= 0 && admitted < 20 {
			t.Errorf("%v then %d: fewer than twenty admitted", got, r.status)
		}
		if admitted == 20 {
			if want := strings.Fields(codes); !slices.Equal(got, want) {
				t.Errorf("the run printed %v, the tour %v", got, want)
			}
			tourCompare(t, r, block)
		}
	})

	t.Run("live controls: exempt, scale x10, block, lift", func(t *testing.T) {
		api := local(t)
		for _, mention := range []string{
			`./bin/slidegate exempt --ip 127.0.0.1 --for 10m --reason "README tour" --yes`,
			"sleep 2   # a new control reaches a running instance within 2 seconds",
			`./bin/slidegate scale --ip 127.0.0.1 x10 --for 10m --reason "README tour" --yes`,
			`./bin/slidegate block --ip 127.0.0.1 --for 1m --reason "README tour" --yes`,
			`./bin/slidegate lift --ip 127.0.0.1 --yes`,
			"make slidegate ",
			"RATE_LIMIT_HASH_KEY=" + deployconfig.DemoHashKey,
			"# 200: exempt, spending nothing",
			`RateLimit-Policy: "anonymous";q=300;w=60`,
			"with `429` and `Retry-After: 60`, the block's end",
			"Lifted, it is back where its counts say: `429`",
		} {
			if !strings.Contains(tour, mention) {
				t.Errorf("the tour's live-controls step no longer says %q", mention)
			}
		}
		// The Redis is started before it is named.
		if start, named := strings.Index(tour, "redis-server --port 47123"), strings.Index(tour, "127.0.0.1:47123"); start < 0 || named < start {
			t.Errorf("the tour names the Redis on 47123 (at %d) before it starts it (at %d)", named, start)
		}
		// The first tour, then each command as the library writes it (what
		// slidegate does on a direct connection), on make local's Redis,
		// with make local's hash key.
		for range 31 {
			api.do(t, "GET", "/v1/items", nil)
		}
		client, err := redisclient.New(redisclient.Config{URL: api.srv.RedisURL, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		op, err := ratelimit.NewLimiter(client, ratelimit.Options{KeyPrefix: "rl", IdentityHashKey: []byte(deployconfig.DemoHashKey), Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		set := func(kind controls.Kind, factor float64, d time.Duration) {
			t.Helper()
			c := controls.Control{Kind: kind, Factor: factor, Until: time.Now().Add(d), Reason: "README tour"}
			if err := op.Controls().Set(ctx, "ip:127.0.0.1", c); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
		}
		set(controls.Exempt, 0, 10*time.Minute)
		// The README's `sleep 2`: a new control reaches the warm instance
		// at its first request after its control watch's next read, at
		// most controls.Propagation after the set; the tour's last denial,
		// in the deny cache, is held no longer. The margin is the test's.
		time.Sleep(controls.Propagation + 500*time.Millisecond)
		if r := api.do(t, "GET", "/v1/items", nil); r.status != http.StatusOK {
			t.Fatalf("exempt: %d, the README says 200 after its sleep 2", r.status)
		}
		set(controls.Scale, 10, 10*time.Minute)
		if r := api.do(t, "GET", "/v1/items", nil); r.status != http.StatusOK || r.header.Get("RateLimit-Policy") != `"anonymous";q=300;w=60` {
			t.Fatalf("scaled: %d %q, the README says 200 with q=300", r.status, r.header.Get("RateLimit-Policy"))
		}
		set(controls.Block, 0, time.Minute)
		r := api.do(t, "GET", "/v1/items", nil)
		if retry, _ := strconv.Atoi(r.header.Get("Retry-After")); r.status != http.StatusTooManyRequests || retry < 58 || retry > 60 {
			t.Fatalf("blocked: %d, Retry-After %q; the README says 429 with Retry-After 60", r.status, r.header.Get("Retry-After"))
		}
		if _, _, err := op.Controls().Lift(ctx, "ip:127.0.0.1"); err != nil {
			t.Fatal(err)
		}
		if r := api.do(t, "GET", "/v1/items", nil); r.status != http.StatusTooManyRequests {
			t.Fatalf("lifted: %d, the README says 429 (31 spent of 30)", r.status)
		}
	})

	t.Run("the other tiers and routes, in the README's order", func(t *testing.T) {
		api := local(t)
		for _, step := range []struct {
			what    string
			method  string
			path    string
			header  map[string]string
			want    []int
			mention string
		}{
			{"org key", "GET", "/v1/items", map[string]string{"x-api-key": "local-demo-key"}, []int{200}, "`org` tier, `200`"},
			{"quota", "GET", "/v1/quota", nil, []int{200}, "your quota, `200`"},
			{"login six times", "POST", "/auth/login", nil, []int{400, 400, 400, 400, 400, 429}, "The first five answer `400`"},
			{"bogus key", "GET", "/v1/items", map[string]string{"x-api-key": "bogus"}, []int{401}, "`401`, and"},
		} {
			if !strings.Contains(tour, step.mention) {
				t.Errorf("%s: the tour no longer says %q", step.what, step.mention)
			}
			var got []int
			for range step.want {
				got = append(got, api.do(t, step.method, step.path, step.header).status)
			}
			if !slices.Equal(got, step.want) {
				t.Errorf("%s: %v, want %v as the README says", step.what, got, step.want)
			}
		}
	})
}

// tourBlock returns the fenced block that follows the text after: its row
// of status codes when it starts with one, and its response (status line
// and headers).
func tourBlock(t *testing.T, readme, after string) (codes, response string) {
	t.Helper()
	i := strings.Index(readme, after)
	if i < 0 {
		t.Fatalf("README: no %q", after)
	}
	rest := readme[i:]
	start := strings.Index(rest, "```\n")
	if start < 0 {
		t.Fatalf("README: no block after %q", after)
	}
	rest = rest[start+4:]
	block := rest[:strings.Index(rest, "```")]
	first, more, _ := strings.Cut(block, "\n")
	// A run of curl prints the codes on one line, and the last answer
	// (--next ... -i) after them on the same line.
	if codes, status, ok := strings.Cut(first, "HTTP/"); ok && regexp.MustCompile(`^(\d{3} ?)+$`).MatchString(codes) {
		return strings.TrimSpace(codes), "HTTP/" + status + "\n" + more
	}
	if regexp.MustCompile(`^(\d{3} ?)+$`).MatchString(first) {
		return first, more
	}
	return "", block
}

// tourCompare checks a response against a tour block: the status line's
// code and the set of header names.
func tourCompare(t *testing.T, r localResponse, block string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(block), "\n")
	status := strings.Fields(lines[0])
	if len(status) < 2 || status[1] != strconv.Itoa(r.status) {
		t.Errorf("status %d, the README shows %q", r.status, lines[0])
	}
	var want []string
	for _, l := range lines[1:] {
		if l == "" {
			break
		}
		name, _, _ := strings.Cut(l, ":")
		want = append(want, http.CanonicalHeaderKey(name))
	}
	var got []string
	for name := range r.header {
		if name == "Date" {
			continue // curl prints it; the tour leaves it out
		}
		got = append(got, name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("header names %v, the README's block shows %v", got, want)
	}
}
