package bucket

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid reports a bad limit or a bad cost. Errors returned by
// Limit.Validate and TakeAt wrap it with a message naming the field, so
// callers test with errors.Is and show the message.
var ErrInvalid = errors.New("bucket: invalid")

// Bounds on the parameters a Limit may carry. They are far beyond any
// sensible policy and keep every intermediate product within 128 bits and
// every duration within int64, so no input can overflow or panic.
const (
	// MaxCapacity is the largest Capacity.
	MaxCapacity = 1_000_000_000_000_000
	// MaxRateN is the largest Rate.N.
	MaxRateN = 1_000_000_000_000_000
	// MinPer is the shortest Rate.Per and the shortest Window.
	MinPer = time.Nanosecond
	// MaxPer is the longest Rate.Per and the longest Window: 366 days.
	MaxPer = 366 * 24 * time.Hour
	// MaxRefill is the longest time an empty token bucket or gcra limit may
	// take to refill its whole Capacity: 100 years of 366 days.
	MaxRefill = 100 * MaxPer
)

// Algorithm names a rate-limiting algorithm. The zero value is TokenBucket.
type Algorithm uint8

// The algorithms. docs/architecture.md §3 gives their contracts.
const (
	// TokenBucket refills Rate continuously up to Capacity.
	TokenBucket Algorithm = iota
	// GCRA decides exactly like TokenBucket with the same Rate and
	// Capacity (its burst), keeping a theoretical arrival time instead of a
	// balance.
	GCRA
	// SlidingWindow estimates the count over the trailing Window from the
	// counts of the current and previous windows.
	SlidingWindow
	// FixedWindow counts per UTC calendar period; up to twice Capacity may
	// pass across a period boundary, which is its contract.
	FixedWindow
	numAlgorithms
)

var algorithmNames = [numAlgorithms]string{"token_bucket", "gcra", "sliding_window", "fixed_window"}

// String returns the name used in the limits file, such as "token_bucket".
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ParseAlgorithm parses a name as returned by Algorithm.String.
func ParseAlgorithm(s string) (Algorithm, error) {
	for i, n := range algorithmNames {
		if s == n {
			return Algorithm(i), nil
		}
	}
	return 0, fmt.Errorf("%w: algorithm %q: want token_bucket, gcra, sliding_window or fixed_window", ErrInvalid, s)
}

// Calendar is a fixed_window period, aligned to the UTC calendar. The zero
// value is not a valid Calendar.
type Calendar uint8

// The calendar periods.
const (
	// Minute periods start at each whole UTC minute.
	Minute Calendar = iota + 1
	// Hour periods start at each whole UTC hour.
	Hour
	// Day periods start at each UTC midnight.
	Day
	// Month periods start at 00:00 UTC on the first of each calendar month.
	Month
	// Second periods start at each whole second. This and the periods
	// below are the units of envoyproxy/ratelimit's fixed window, which
	// divides Unix time into equal periods from the epoch; ParseCalendar
	// (the limits file) does not accept them.
	Second
	// Week periods are 7 days long, counted from the Unix epoch (they start
	// on Thursdays at 00:00 UTC).
	Week
	// Days30 periods are 30 days long, counted from the Unix epoch
	// (envoyproxy/ratelimit's MONTH).
	Days30
	// Days365 periods are 365 days long, counted from the Unix epoch
	// (envoyproxy/ratelimit's YEAR).
	Days365
)

// String returns "minute", "hour", "day", "month", "second", "week", "30d"
// or "365d".
func (c Calendar) String() string {
	switch c {
	case Second:
		return "second"
	case Week:
		return "week"
	case Days30:
		return "30d"
	case Days365:
		return "365d"
	case Minute:
		return "minute"
	case Hour:
		return "hour"
	case Day:
		return "day"
	case Month:
		return "month"
	}
	return fmt.Sprintf("calendar(%d)", uint8(c))
}

// ParseCalendar parses a name as returned by Calendar.String.
func ParseCalendar(s string) (Calendar, error) {
	for c := Minute; c <= Month; c++ {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: calendar %q: want minute, hour, day or month", ErrInvalid, s)
}

// Rate is N tokens every Per, kept as an exact rational: "2/s" is
// Rate{N: 2, Per: time.Second} and "1/3s" is never rounded.
type Rate struct {
	N   int64
	Per time.Duration
}

// String formats the rate as "N/Per", such as "2/1s".
func (r Rate) String() string { return fmt.Sprintf("%d/%v", r.N, r.Per) }

// Limit is the policy of one named limit: an algorithm and its parameters.
// Fields an algorithm does not use are ignored. The zero value is invalid.
type Limit struct {
	Algorithm Algorithm
	// Capacity is the token bucket capacity, the gcra burst, or the window
	// limit; 1..MaxCapacity.
	Capacity int64
	// Rate is the refill rate, for TokenBucket and GCRA only.
	Rate Rate
	// Window is the window length, for SlidingWindow only; MinPer..MaxPer.
	Window time.Duration
	// Calendar is the period, for FixedWindow only.
	Calendar Calendar
}

// Validate reports whether l is usable. The error wraps ErrInvalid and
// names the offending field. Validate changes nothing.
func (l Limit) Validate() error {
	if l.Algorithm >= numAlgorithms {
		return fmt.Errorf("%w: algorithm %d unknown", ErrInvalid, l.Algorithm)
	}
	if l.Capacity < 1 || l.Capacity > MaxCapacity {
		return fmt.Errorf("%w: capacity %d: want 1..%d", ErrInvalid, l.Capacity, int64(MaxCapacity))
	}
	switch l.Algorithm {
	case TokenBucket, GCRA:
		if l.Rate.N < 1 || l.Rate.N > MaxRateN {
			return fmt.Errorf("%w: rate count %d: want 1..%d", ErrInvalid, l.Rate.N, int64(MaxRateN))
		}
		if l.Rate.Per < MinPer || l.Rate.Per > MaxPer {
			return fmt.Errorf("%w: rate period %v: want %v..%v", ErrInvalid, l.Rate.Per, MinPer, MaxPer)
		}
		// Capacity*Per/N <= MaxRefill, compared without dividing.
		if mul(uint64(l.Rate.N), uint64(MaxRefill)).less(mul(uint64(l.Capacity), uint64(l.Rate.Per))) {
			return fmt.Errorf("%w: capacity %d at rate %v takes longer than %v to refill", ErrInvalid, l.Capacity, l.Rate, time.Duration(MaxRefill))
		}
	case SlidingWindow:
		if l.Window < MinPer || l.Window > MaxPer {
			return fmt.Errorf("%w: window %v: want %v..%v", ErrInvalid, l.Window, MinPer, MaxPer)
		}
	case FixedWindow:
		if l.Calendar < Minute || l.Calendar > Days365 {
			return fmt.Errorf("%w: calendar %d: want minute, hour, day, month, second, week, 30d or 365d", ErrInvalid, l.Calendar)
		}
	}
	return nil
}

// refill returns ceil(Capacity*Per/N) in nanoseconds: the time an empty
// bucket takes to fill. l must have a positive rate.
func (l Limit) refill() uint64 {
	return mul(uint64(l.Capacity), uint64(l.Rate.Per)).divCeil(uint64(l.Rate.N))
}

// PolicyWindow returns the window to advertise in a RateLimit-Policy header
// (w=): for TokenBucket and GCRA the time an empty bucket takes to refill
// Capacity, rounded up; for SlidingWindow the Window; for FixedWindow the
// calendar period, a month counting as 30 days. It returns 0 for an
// invalid limit.
func (l Limit) PolicyWindow() time.Duration {
	if l.Validate() != nil {
		return 0
	}
	switch l.Algorithm {
	case TokenBucket, GCRA:
		return time.Duration(l.refill())
	case SlidingWindow:
		return l.Window
	}
	if size := l.Calendar.epochSize(); size > 0 {
		return time.Duration(size)
	}
	return 30 * 24 * time.Hour
}

// Scale returns the limit with capacity and rate divided by n, the share of
// one of n nodes when they fall back to local ceilings. Capacity stays at
// least 1 and the rate positive; the rate is divided exactly (by
// lengthening Per) when N is not a multiple of n and Per has room, else N is
// divided and rounded down to at least 1. n < 1 counts as 1. Window and
// Calendar are unchanged.
func (l Limit) Scale(n int) Limit {
	if n <= 1 {
		return l
	}
	k := int64(n)
	l.Capacity = max(1, l.Capacity/k)
	if l.Algorithm == TokenBucket || l.Algorithm == GCRA {
		switch {
		case l.Rate.N%k == 0:
			l.Rate.N /= k
		case l.Rate.Per > 0 && l.Rate.Per <= MaxPer/time.Duration(k):
			l.Rate.Per *= time.Duration(k)
		default:
			l.Rate.N = max(1, l.Rate.N/k)
		}
	}
	return l
}
