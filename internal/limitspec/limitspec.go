// Package limitspec holds the numbers pkg/ratelimit is built around that
// the product's configuration and wire contract must agree with: the range
// of a limit, and the defaults of the settings a caller may leave unset.
//
// They are not part of pkg/ratelimit's API (its documentation states them
// in words), but the configuration defaults REDIS_TIMEOUT and
// RATE_LIMIT_FALLBACK_INSTANCES to them, and the authorizer context is
// checked against the same bounds, so both read them from here rather than
// restating them.
package limitspec

import "time"

// Bounds of a limit. Windows are whole milliseconds so that key expiry
// (PEXPIRE) and window edges agree. The scripts compute with products of a
// count and a window, exact only below 2^53 (Lua numbers are doubles), so
// count x window may not exceed MaxCountWindow: in milliseconds for the
// sliding window (1,000,000/1d, not 1,000,000/30d), which decides a limit
// past MaxCountWindow in microseconds on a millisecond clock; in
// microseconds for the algorithms that keep time stamps (10,000/1d, not
// 100,000/1d); the fixed window multiplies no count by a window.
const (
	MinWindow      = time.Millisecond
	MaxWindow      = 366 * 24 * time.Hour
	MaxCount       = 1_000_000
	MaxCountWindow = 1 << 50
)

// DefaultTimeout is the whole Redis budget of one decision when
// REDIS_TIMEOUT is unset, and what ratelimit.NewClient and ratelimit.Gate
// apply when given no timeout.
const DefaultTimeout = 100 * time.Millisecond

// DefaultKeyPrefix starts every Redis key unless ratelimit.Options.KeyPrefix
// says otherwise.
const DefaultKeyPrefix = "rl"

// DefaultFallbackInstances is the number of warm instances a Gate's
// fallback divides every limit by when ratelimit.GateOptions.FallbackInstances
// is zero, and the default of RATE_LIMIT_FALLBACK_INSTANCES.
const DefaultFallbackInstances = 10
