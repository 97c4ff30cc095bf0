package api

import (
	"strconv"
	"unicode/utf8"
)

// InlineLimit is a rate limit's parameters sent with a check instead of a
// name from the limits file (Check.Inline), allowed only when the file sets
// inline_limits: true. The fields are a rate limit's fields in the limits
// file, with the same names, syntax and ranges; a zero number or an empty
// string is a field not given. The Decider validates an inline limit
// exactly as it validates the file (unknown algorithm, fields that do not
// belong to it, out-of-range values are all invalid):
//
//	token_bucket    Capacity, Rate
//	gcra            Burst, Rate
//	sliding_window  Limit, Window (a duration)
//	fixed_window    Limit, Window (minute | hour | day | month)
//
// InlineLimit is comparable.
type InlineLimit struct {
	Algorithm string // token_bucket when empty
	Capacity  int64
	Burst     int64
	Limit     int64
	Rate      string // "N/period", like "2/s" or "5/10s"
	Window    string
}

// Bounds on inline limits that the transports check before a Decider is
// called; the ranges of the values are the limits file's, checked by the
// Decider.
const (
	// MaxInlineChecks is the most checks of one take that may carry an
	// inline limit.
	MaxInlineChecks = 16
	// MaxInlineFieldBytes bounds an inline limit's algorithm, rate and
	// window strings.
	MaxInlineFieldBytes = 32
)

// checkInlines bounds the inline limits of a take: at most MaxInlineChecks
// of them, each string field at most MaxInlineFieldBytes of valid UTF-8.
func checkInlines(checks []Check) *Error {
	n := 0
	for i, c := range checks {
		if c.Inline == nil {
			continue
		}
		if n++; n > MaxInlineChecks {
			return invalidf("more than %d checks carry an inline limit", MaxInlineChecks)
		}
		for _, f := range [...]struct{ name, v string }{
			{"algorithm", c.Inline.Algorithm}, {"rate", c.Inline.Rate}, {"window", c.Inline.Window},
		} {
			switch {
			case len(f.v) > MaxInlineFieldBytes:
				return invalidf("checks[%d].inline.%s is %d bytes, over the %d-byte maximum", i, f.name, len(f.v), MaxInlineFieldBytes)
			case !utf8.ValidString(f.v):
				return invalidf("checks[%d].inline.%s is not valid UTF-8", i, f.name)
			}
		}
	}
	return nil
}

// String formats an inline limit the way the limits file would hold it,
// for logs and tests: "gcra burst=16 rate=30/60s".
func (l InlineLimit) String() string {
	alg := l.Algorithm
	if alg == "" {
		alg = "token_bucket"
	}
	s := alg
	for _, f := range [...]struct {
		name string
		v    int64
	}{{"capacity", l.Capacity}, {"burst", l.Burst}, {"limit", l.Limit}} {
		if f.v != 0 {
			s += " " + f.name + "=" + strconv.FormatInt(f.v, 10)
		}
	}
	if l.Rate != "" {
		s += " rate=" + l.Rate
	}
	if l.Window != "" {
		s += " window=" + l.Window
	}
	return s
}
