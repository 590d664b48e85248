package identity_test

import (
	"sync"
	"time"

	"github.com/slidegate/slidegate/internal/testkit/holdgate"
)

// clock is a test clock, safe for the background loads that read it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// holdGate is the shared test gate (internal/testkit/holdgate).
type holdGate = holdgate.Gate

func newHoldGate() *holdGate { return holdgate.New() }
