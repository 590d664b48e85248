package controls_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// TestRefusalsWrapRatelimitErrInvalid: what this package refuses wraps
// ratelimit.ErrInvalid itself, as the Limiter's own refusals do, so one
// errors.Is serves a caller of both.
func TestRefusalsWrapRatelimitErrInvalid(t *testing.T) {
	if _, err := controls.ParseKind("throttle"); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("ParseKind(throttle) = %v, want ratelimit.ErrInvalid", err)
	}
	if err := (controls.Control{Kind: controls.Block}).Validate(time.Now()); !errors.Is(err, ratelimit.ErrInvalid) {
		t.Errorf("Validate of a control with no end = %v, want ratelimit.ErrInvalid", err)
	}
}

// A control as the operator's tools build it: parsed from a name, checked
// against the clock the Limiter stores it at, then set with Store.Set.
func ExampleControl_Validate() {
	kind, err := controls.ParseKind("scale")
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := controls.Control{Kind: kind, Factor: 0.25, Until: now.Add(time.Hour), Reason: "scraper", SetBy: "ops"}
	fmt.Println(c.Kind, c.Validate(now))
	c.Until = now.Add(controls.MaxDuration + time.Hour)
	fmt.Println(errors.Is(c.Validate(now), ratelimit.ErrInvalid))
	// Output:
	// scale <nil>
	// true
}

// The operator's side: block a caller for an hour, on the Redis clock the
// decisions compare its end with, then read the network controls as a
// serving process does (once per Propagation, shared with the Limiter's
// decisions).
func ExampleStore() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	limiter, err := ratelimit.NewLimiter(client, ratelimit.Options{Controls: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	store := limiter.Controls()
	now, err := store.Time(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	block := controls.Control{Kind: controls.Block, Until: now.Add(time.Hour), Reason: "credential stuffing", SetBy: "ops"}
	if err := store.Set(ctx, "ip:203.0.113.7", block); err != nil {
		fmt.Println(err)
		return
	}
	cache := controls.NewNetworkControlCache(store, controls.Propagation)
	networks, err := cache.Get(ctx)
	fmt.Println(len(networks), err)
}
