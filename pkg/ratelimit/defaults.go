package ratelimit

import "time"

// defaultTimeout is the budget of one decision when none is given, as
// Options.Timeout and Gate document it.
const defaultTimeout = 100 * time.Millisecond
