package api

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file holds the input checks every front end runs before it calls a
// Decider (the package doc's "Input checks"), so that every API rejects the
// same input with the same detail, and the millisecond conversions every
// API shares. Every error is an *Error with CodeInvalid whose detail names
// the offending field and never contains the caller's key.

// Bounds shared by the front ends. A front end's configuration may lower or
// raise the first two; the lease id bound is fixed.
const (
	// DefaultMaxKeyBytes is the default bound on a key, a limit name and a
	// lease holder, in bytes.
	DefaultMaxKeyBytes = 512
	// DefaultMaxChecks is the default bound on the checks of one take.
	DefaultMaxChecks = 100
	// MaxLeaseIDBytes bounds an opaque lease id. Ids may embed routing
	// information, so the bound is generous; anything longer cannot be an
	// id a node issued.
	MaxLeaseIDBytes = 2048
	// MaxLeaseWait is the longest an acquire may wait in a queue: the
	// ceiling of any limit's queue.max_wait (node/limits.MaxQueueWait). A
	// longer wait_ms is accepted and waits this long at most, as a wait
	// above the limit's own max_wait waits max_wait; so every deadline
	// computed from a wait (a queued HTTP answer's write deadline, a
	// forward's) stays far from time.Duration's overflow.
	MaxLeaseWait = time.Hour
)

// maxDurationMs is the largest millisecond count that fits a time.Duration.
const maxDurationMs = math.MaxInt64 / int64(time.Millisecond)

// maxDetailValue bounds how much of a caller's value a detail may quote.
const maxDetailValue = 48

// inputLimits are the bounds a front end enforces before a Decider sees a
// request.
type inputLimits struct {
	maxKeyBytes int // bytes in a limit name, key or lease holder
	maxChecks   int // checks in one take
}

func invalidf(format string, args ...any) *Error { return Errorf(CodeInvalid, format, args...) }

// ValidateChecks runs the input checks of a take on checks: a list of 1 to
// maxChecks checks, each with a limit and a key of 1 to maxKeyBytes bytes
// of valid UTF-8, a positive cost, and inline limits within their bounds
// (MaxInlineChecks, MaxInlineFieldBytes). The range of a cost against its
// limit's capacity is the Decider's to check. A failure is an *Error with
// CodeInvalid.
func ValidateChecks(checks []Check, maxKeyBytes, maxChecks int) error {
	if e := checkChecks(checks, inputLimits{maxKeyBytes: maxKeyBytes, maxChecks: maxChecks}); e != nil {
		return e
	}
	return nil
}

// ValidateField checks a limit name, key or other caller string named
// field: present, at most maxBytes bytes, valid UTF-8 (the peer transport
// cannot carry anything else). A failure is an *Error with CodeInvalid
// whose detail is field followed by the problem ("key is empty", "limit is
// 600 bytes, over the 512-byte maximum"), never the value.
func ValidateField(field, s string, maxBytes int) error {
	if e := checkField(-1, field, s, maxBytes); e != nil {
		return e
	}
	return nil
}

// NewAcquireRequest builds an AcquireRequest from wire fields, with the
// input checks every front end runs: ttlMs and waitMs are non-negative
// millisecond counts that fit a time.Duration, limit and key 1 to
// maxKeyBytes bytes of valid UTF-8, holder at most maxKeyBytes. A failure
// is an *Error with CodeInvalid.
func NewAcquireRequest(limit, key, holder string, ttlMs, waitMs int64, maxKeyBytes int) (AcquireRequest, error) {
	return acquireRequest(limit, key, holder, ttlMs, waitMs, inputLimits{maxKeyBytes: maxKeyBytes})
}

// ValidateLeaseID checks an opaque lease id: 1 to MaxLeaseIDBytes bytes of
// valid UTF-8. A failure is an *Error with CodeInvalid.
func ValidateLeaseID(id string) error {
	if e := checkLeaseID(id); e != nil {
		return e
	}
	return nil
}

// Clip shortens a caller's value for quoting in an error detail (an unknown
// JSON field, a header name, a domain): at most 48 bytes, then "...".
// Details never quote a key, clipped or not.
func Clip(s string) string {
	if len(s) <= maxDetailValue {
		return s
	}
	return s[:maxDetailValue] + "..."
}

// checkField validates a limit name or key: present, at most max bytes, valid
// UTF-8 (the gRPC transport between nodes cannot carry anything else). idx >= 0
// prefixes the detail with checks[idx]. The detail names the field, never its
// value.
func checkField(idx int, field, s string, max int) *Error {
	var problem string
	switch {
	case s == "":
		problem = "is empty"
	case len(s) > max:
		problem = "is " + strconv.Itoa(len(s)) + " bytes, over the " + strconv.Itoa(max) + "-byte maximum"
	case !utf8.ValidString(s):
		problem = "is not valid UTF-8"
	default:
		return nil
	}
	if idx >= 0 {
		return invalidf("checks[%d].%s %s", idx, field, problem)
	}
	return invalidf("%s %s", field, problem)
}

// checkChecks validates a whole take: a non-empty list within maxChecks, each
// with a limit, a key and a positive cost. The range of the cost against the
// limit's capacity is the Decider's to check.
func checkChecks(checks []Check, lim inputLimits) *Error {
	if len(checks) == 0 {
		return invalidf("checks is empty")
	}
	if len(checks) > lim.maxChecks {
		return invalidf("checks has %d entries, over the %d maximum", len(checks), lim.maxChecks)
	}
	for i, c := range checks {
		if e := checkField(i, "limit", c.Limit, lim.maxKeyBytes); e != nil {
			return e
		}
		if e := checkField(i, "key", c.Key, lim.maxKeyBytes); e != nil {
			return e
		}
		if c.Cost < 1 {
			return invalidf("checks[%d].cost must be a positive integer", i)
		}
	}
	return checkInlines(checks)
}

// checkAcquire validates a lease request after its durations were converted.
func checkAcquire(req AcquireRequest, lim inputLimits) *Error {
	if e := checkField(-1, "limit", req.Limit, lim.maxKeyBytes); e != nil {
		return e
	}
	if e := checkField(-1, "key", req.Key, lim.maxKeyBytes); e != nil {
		return e
	}
	if len(req.Holder) > lim.maxKeyBytes {
		return invalidf("holder is %d bytes, over the %d-byte maximum", len(req.Holder), lim.maxKeyBytes)
	}
	if !utf8.ValidString(req.Holder) {
		return invalidf("holder is not valid UTF-8")
	}
	return nil
}

// checkLeaseID validates an opaque lease id.
func checkLeaseID(id string) *Error {
	return checkField(-1, "lease id", id, MaxLeaseIDBytes)
}

// acquireRequest builds and validates an AcquireRequest from wire fields.
func acquireRequest(limit, key, holder string, ttlMs, waitMs int64, lim inputLimits) (AcquireRequest, error) {
	ttl, e := msDuration("ttl_ms", ttlMs)
	if e != nil {
		return AcquireRequest{}, e
	}
	wait, e := msDuration("wait_ms", waitMs)
	if e != nil {
		return AcquireRequest{}, e
	}
	req := AcquireRequest{Limit: limit, Key: key, Holder: holder, TTL: ttl, Wait: min(wait, MaxLeaseWait)}
	if e := checkAcquire(req, lim); e != nil {
		return AcquireRequest{}, e
	}
	return req, nil
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
// as every API reports lease lifetimes: a holder never believes it holds a
// lease longer than it does.
func MillisDown(d time.Duration) int64 { return msDown(d) }

// MillisDuration converts a millisecond figure a server sent to a
// duration, clamped: a negative figure (never sent) is zero and one that
// overflows a time.Duration is the largest duration. Clients use it where
// a figure is an answer, not a caller's input (see Milliseconds).
func MillisDuration(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms > maxDurationMs:
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// msDuration converts a caller's millisecond count; negative or overflowing
// values are invalid.
func msDuration(field string, ms int64) (time.Duration, *Error) {
	if ms < 0 {
		return 0, invalidf("%s must not be negative", field)
	}
	if ms > maxDurationMs {
		return 0, invalidf("%s is too large", field)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// msUp returns d in whole milliseconds rounded up, 0 for d <= 0.
func msUp(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// msDown returns d in whole milliseconds rounded down, 0 for d <= 0.
func msDown(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(d / time.Millisecond)
}

// secondsUp returns d in whole seconds rounded up, 0 for d <= 0.
func secondsUp(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
