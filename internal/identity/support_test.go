package identity_test

import (
	"time"

	"github.com/slidegate/slidegate/internal/testkit"
	"github.com/slidegate/slidegate/internal/testkit/holdgate"
)

// newClock returns a test clock, safe for the background loads that read
// it, at a fixed start.
func newClock() *testkit.Clock { return testkit.NewClock(time.Unix(1_800_000_000, 0)) }

// holdGate is the shared test gate (internal/testkit/holdgate).
type holdGate = holdgate.Gate

func newHoldGate() *holdGate { return holdgate.New() }
