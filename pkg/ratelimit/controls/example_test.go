package controls_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

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
// against the clock the Limiter stores it at, then set with
// Limiter.SetControl.
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
