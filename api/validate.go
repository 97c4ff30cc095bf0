package api

import "time"

// This file exports the transports' input checks (the package doc's "Input
// checks") to transports that live in their own packages, such as the RESP
// server in api/resp, so every API rejects the same input with the same
// detail.

// ValidateChecks runs the input checks of a take on checks: a list of 1 to
// maxChecks checks, each with a limit and a key of 1 to maxKeyBytes bytes
// of valid UTF-8, a positive cost, and inline limits within their bounds.
// A failure is an *Error with CodeInvalid.
func ValidateChecks(checks []Check, maxKeyBytes, maxChecks int) error {
	if e := checkChecks(checks, inputLimits{maxKeyBytes: maxKeyBytes, maxChecks: maxChecks}); e != nil {
		return e
	}
	return nil
}

// NewAcquireRequest builds an AcquireRequest from wire fields, with the
// input checks HTTP and gRPC run: ttlMs and waitMs are non-negative
// millisecond counts that fit a time.Duration, limit and key 1 to
// maxKeyBytes bytes of valid UTF-8, holder at most maxKeyBytes. A failure
// is an *Error with CodeInvalid.
func NewAcquireRequest(limit, key, holder string, ttlMs, waitMs int64, maxKeyBytes int) (AcquireRequest, error) {
	return acquireRequest(limit, key, holder, ttlMs, waitMs, inputLimits{maxKeyBytes: maxKeyBytes})
}

// ValidateLeaseID checks an opaque lease id: 1 to 2048 bytes of valid UTF-8.
// A failure is an *Error with CodeInvalid.
func ValidateLeaseID(id string) error {
	if e := checkLeaseID(id); e != nil {
		return e
	}
	return nil
}

// Milliseconds converts a caller's millisecond count to a duration; a
// negative or overflowing count is an *Error with CodeInvalid naming field.
func Milliseconds(field string, ms int64) (time.Duration, error) {
	d, e := msDuration(field, ms)
	if e != nil {
		return 0, e
	}
	return d, nil
}

// MillisUp returns d in whole milliseconds rounded up (0 for d <= 0), as
// every API reports retry and reset figures: a caller that waits them is
// never early.
func MillisUp(d time.Duration) int64 { return msUp(d) }

// MillisDown returns d in whole milliseconds rounded down (0 for d <= 0),
// as every API reports lease lifetimes.
func MillisDown(d time.Duration) int64 { return msDown(d) }
