// Package errs holds the sentinel errors package ratelimit exports as
// ErrUnavailable and ErrInvalid, and package controls as ErrMalformed and
// ErrTooMany, so that every package under pkg/ratelimit wraps the very
// same values.
package errs

import "errors"

// ErrUnavailable is ratelimit.ErrUnavailable.
var ErrUnavailable = errors.New("rate limiter unavailable")

// ErrInvalid is ratelimit.ErrInvalid.
var ErrInvalid = errors.New("invalid rate-limit request")

// ErrMalformed is controls.ErrMalformed.
var ErrMalformed = errors.New("malformed control record")

// ErrTooMany is controls.ErrTooMany.
var ErrTooMany = errors.New("too many live controls")
