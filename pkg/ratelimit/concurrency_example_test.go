package ratelimit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/slidegate/slidegate/pkg/ratelimit"
	"github.com/slidegate/slidegate/pkg/ratelimit/redisclient"
)

// A concurrency limit of 2 with Redis out of reach: the Gate's local count
// (one instance's share is the whole limit here) holds two slots, denies
// the third with a short retry hint, and frees a slot on Release.
func ExampleGate_Acquire() {
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
	limit := ratelimit.ConcurrencyLimit{Name: "org", Max: 2, Lease: 15 * time.Minute}

	ctx := context.Background()
	var held []ratelimit.Slot
	for range 3 {
		slot, err := gate.Acquire(ctx, ratelimit.FailOpen, "org:acme", limit)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("acquired", slot.Acquired, "held", slot.Held, "retry after", slot.RetryAfter, "degraded", slot.Degraded)
		if slot.Acquired {
			held = append(held, slot)
		}
	}
	released, err := gate.Release(ctx, held[0])
	fmt.Println("released", released, err)
	slot, _ := gate.Acquire(ctx, ratelimit.FailOpen, "org:acme", limit)
	fmt.Println("acquired", slot.Acquired, "held", slot.Held)
	// Output:
	// acquired true held 1 retry after 0s degraded true
	// acquired true held 2 retry after 0s degraded true
	// acquired false held 2 retry after 1s degraded true
	// released true <nil>
	// acquired true held 2
}
