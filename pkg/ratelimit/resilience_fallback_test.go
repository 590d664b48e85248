package ratelimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit"
)

// TestFallbackFloodCannotResetASpentIdentity: with the real redis-server
// stopped, the Gate falls back to its local limit; an identity that has
// spent its local share stays denied after a flood of ten times the
// fallback's bound of new identities, each admitted by the fallback.
func TestFallbackFloodCannotResetASpentIdentity(t *testing.T) {
	const maxEntries = 64
	server := redistest.StartServer(t)
	client := clientWithBudget(t, server.URL(), false, time.Second)
	gate := productionGate(t, client, "fbflood:", ratelimit.GateOptions{
		FallbackInstances:  10,
		FallbackMaxEntries: maxEntries,
	})
	ctx := context.Background()
	limit := ratelimit.Limit{Name: "anonymous", Count: 100, Window: time.Hour} // local share 10
	victim := ratelimit.Check{Identity: "ip:203.0.113.9", Limit: limit}

	if res, err := gate.Decide(ctx, 1, ratelimit.FailOpen, victim); err != nil || res.Degraded || !res.Allowed {
		t.Fatalf("with Redis up: %+v, %v; want a Redis allowance", res, err)
	}
	server.Stop()

	admitted := 0
	for range 20 {
		res, err := gate.Decide(ctx, 1, ratelimit.FailOpen, victim)
		if err != nil || !res.Degraded {
			t.Fatalf("with Redis stopped: %+v, %v; want a degraded decision", res, err)
		}
		if res.Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("the fallback admitted the victim %d times, want its local share 10", admitted)
	}

	for i := range maxEntries * 10 {
		flood := ratelimit.Check{Identity: fmt.Sprintf("ip:flood-%d", i), Limit: limit}
		res, err := gate.Decide(ctx, 1, ratelimit.FailOpen, flood)
		if err != nil || !res.Degraded || !res.Allowed {
			t.Fatalf("flood identity %d: %+v, %v; want a degraded allowance", i, res, err)
		}
	}

	res, err := gate.Decide(ctx, 1, ratelimit.FailOpen, victim)
	if err != nil || !res.Degraded {
		t.Fatalf("victim after the flood: %+v, %v; want a degraded decision", res, err)
	}
	if res.Allowed {
		t.Fatalf("the victim was admitted after a flood of %d new identities: its spent share was reset", maxEntries*10)
	}
}
