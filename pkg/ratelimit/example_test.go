package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/slidegate/slidegate/pkg/httplimit"
	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// A caller's tier limit and a stricter limit on the login route, decided
// together in one script call: the request passes only if both admit it,
// and a denial spends nothing. (Not run: it needs a Redis server.)
func Example() {
	ctx := context.Background()
	client, err := redisclient.New(redisclient.Config{URL: "redis://localhost:6379"})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	// At start: a failure here is not fatal, the scripts load on first use.
	_ = limiter.LoadScripts(ctx)
	gate := ratelimit.NewGate(limiter, ratelimit.GateOptions{})

	http.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		tier := ratelimit.Check{Identity: ip, Limit: ratelimit.Limit{Name: "anonymous", Count: 30, Window: time.Minute}}
		login := ratelimit.Check{Identity: ip, Limit: ratelimit.Limit{Name: "login", Count: 5, Window: time.Minute, Algorithm: ratelimit.SlidingLog}}
		res, err := gate.Decide(r.Context(), 1, ratelimit.FailClosed, tier, login)
		switch {
		case errors.Is(err, ratelimit.ErrUnavailable):
			http.Error(w, "try again later", http.StatusServiceUnavailable)
			return
		case err != nil:
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		httplimit.SetHeaders(w.Header(), res)
		if !res.Allowed {
			http.Error(w, fmt.Sprintf("rate limited, retry in %s", res.RetryAfter().Round(time.Second)), http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "welcome")
	})
	log.Fatal(http.ListenAndServe("localhost:8080", nil))
}

// With Redis out of reach, the failure policy decides: a fail-open request
// is decided by the in-memory fallback (here one instance's share of a
// limit of 2 is the whole limit), a fail-closed one gets ErrUnavailable.
func ExampleGate_Decide() {
	client, err := redisclient.New(redisclient.Config{URL: "redis://127.0.0.1:1", Timeout: 50 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{})
	if err != nil {
		log.Fatal(err)
	}
	gate := ratelimit.NewGate(limiter, ratelimit.GateOptions{FallbackInstances: 1})
	check := ratelimit.Check{Identity: "198.51.100.7", Limit: ratelimit.Limit{Name: "user", Count: 2, Window: time.Minute}}

	ctx := context.Background()
	for range 3 {
		res, err := gate.Decide(ctx, 1, ratelimit.FailOpen, check)
		fmt.Println("fail-open: allowed", res.Allowed, "degraded", res.Degraded, "error", err)
	}
	_, err = gate.Decide(ctx, 1, ratelimit.FailClosed, check)
	fmt.Println("fail-closed: unavailable", errors.Is(err, ratelimit.ErrUnavailable))
	// Output:
	// fail-open: allowed true degraded true error <nil>
	// fail-open: allowed true degraded true error <nil>
	// fail-open: allowed false degraded true error <nil>
	// fail-closed: unavailable true
}
