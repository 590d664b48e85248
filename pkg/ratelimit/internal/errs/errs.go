// Package errs holds the sentinel errors package ratelimit exports as
// ErrUnavailable and ErrInvalid, so that package controls, which ratelimit
// imports, wraps the very same values.
package errs

import "errors"

// Unavailable is ratelimit.ErrUnavailable.
var Unavailable = errors.New("rate limiter unavailable")

// Invalid is ratelimit.ErrInvalid.
var Invalid = errors.New("invalid rate-limit request")
