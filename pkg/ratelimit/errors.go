package ratelimit

import "github.com/slidegate/slidegate/pkg/ratelimit/internal/errs"

// ErrUnavailable wraps every failure to reach a decision on Redis: refused or
// dropped connections, timeouts, cluster errors. Callers branch on it with
// errors.Is to apply their failure policy (fail open with a local limit, or
// fail closed).
var ErrUnavailable = errs.ErrUnavailable

// ErrInvalid wraps every rejection of a caller's arguments: no checks, a
// cost below 1 or above a limit's burst, a limit out of range, two checks
// on one key (see Limiter.Decide). Such a request can never be decided, so
// retrying it is pointless.
var ErrInvalid = errs.ErrInvalid
