package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/redistest"
	"github.com/slidegate/slidegate/pkg/ratelimit/controls"
)

// narrowClient has only the methods rediser lists: not a
// redis.UniversalClient, nor even a redis.Cmdable.
type narrowClient struct{ rediser }

// TestNewLimiterTakesTheNarrowInterface: a Limiter built on a client that
// has nothing but the commands rediser lists decides, resets, and sets
// and reads a live control, so NewLimiter asks for no more than it uses.
func TestNewLimiterTakesTheNarrowInterface(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := NewLimiter(narrowClient{redistest.StartServer(t).Client(t)}, Options{KeyPrefix: "narrow", Controls: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	check := Check{Identity: "ip:203.0.113.7", Limit: Limit{Name: "n", Count: 2, Window: time.Minute}}
	for i, want := range []bool{true, true, false} {
		res, err := l.Decide(ctx, 1, check)
		if err != nil || res.Allowed != want {
			t.Fatalf("decision %d: allowed %v, %v; want %v", i, res.Allowed, err, want)
		}
	}
	if _, err := l.Reset(ctx, check); err != nil {
		t.Fatalf("reset: %v", err)
	}
	now, err := l.Controls().Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := controls.Control{Kind: controls.Block, Until: now.Add(time.Minute), Reason: "test"}
	if err := l.Controls().Set(ctx, check.Identity, c); err != nil {
		t.Fatalf("set control: %v", err)
	}
	if _, ok, err := l.Controls().Get(ctx, check.Identity); err != nil || !ok {
		t.Fatalf("get control: %v, %v", ok, err)
	}
	if list, err := l.Controls().List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("list controls: %v, %v", list, err)
	}
	if _, ok, err := l.Controls().Lift(ctx, check.Identity); err != nil || !ok {
		t.Fatalf("lift control: %v, %v", ok, err)
	}
}
