// Package errs holds the sentinel errors package ratelimit exports as
// ErrUnavailable and ErrInvalid, so that package controls, which ratelimit
// imports, wraps the very same values.
package errs

import "errors"

// ErrUnavailable is ratelimit.ErrUnavailable.
var ErrUnavailable = errors.New("rate limiter unavailable")

// ErrInvalid is ratelimit.ErrInvalid.
var ErrInvalid = errors.New("invalid rate-limit request")
