package limits

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weir-rl/weir/bucket"
)

// Bounds on rates and windows. MinPeriod is stricter than package bucket's
// (a period under a millisecond in a file is a typo); the others are
// bucket's own.
const (
	// MaxRateCount is the largest N in a rate "N/period".
	MaxRateCount = bucket.MaxRateN
	// MinPeriod is the shortest period of a rate, and the shortest
	// sliding window.
	MinPeriod = time.Millisecond
	// MaxPeriod is the longest period of a rate, and the longest sliding
	// window: 366 days.
	MaxPeriod = bucket.MaxPer
)

// day is the unit "d": 24 hours, not a calendar day.
const day = 24 * time.Hour

// ParseRate parses a rate "N/period" such as "2/s", "100/m", "10/h" or
// "1000/d". N is a positive decimal integer (digits only: no sign, no
// exponent, no fraction) up to MaxRateCount. The period is a unit, s, m, h
// or d (a day is 24 hours), or a count and a unit: a Go duration such as
// "10s", "1m30s" or "500ms", or whole days such as "7d". The period lies in
// MinPeriod..MaxPeriod. Surrounding spaces are ignored; none are allowed
// inside. So "5/10s" is five per ten seconds, and "2/s" is Rate{N: 2, Per:
// time.Second}: the period is kept as written, not reduced.
func ParseRate(s string) (bucket.Rate, error) {
	r, err := parseRate(s)
	if err != nil {
		return bucket.Rate{}, errorf("%w", err)
	}
	return r, nil
}

// parseRate is ParseRate with messages that carry no package prefix, for
// use inside line-numbered messages.
func parseRate(s string) (bucket.Rate, error) {
	s = strings.TrimSpace(s)
	num, per, ok := strings.Cut(s, "/")
	if !ok {
		return bucket.Rate{}, fmt.Errorf("rate %q: want N/period, like 2/s, 100/m or 5/10s", s)
	}
	n, err := parseCount(num)
	if err != nil {
		return bucket.Rate{}, fmt.Errorf("rate %q: %w", s, err)
	}
	if n > MaxRateCount {
		return bucket.Rate{}, fmt.Errorf("rate %q: count must be at most %d", s, int64(MaxRateCount))
	}
	var d time.Duration
	switch per {
	case "s":
		d = time.Second
	case "m":
		d = time.Minute
	case "h":
		d = time.Hour
	case "d":
		d = day
	default:
		d, err = parseDuration(per)
		if err != nil {
			return bucket.Rate{}, fmt.Errorf("rate %q: period %q: want s, m, h, d or a duration like 10s", s, per)
		}
	}
	if d < MinPeriod || d > MaxPeriod {
		return bucket.Rate{}, fmt.Errorf("rate %q: period must be between %v and %v", s, MinPeriod, fmtDuration(MaxPeriod))
	}
	return bucket.Rate{N: n, Per: d}, nil
}

// parseCount parses a positive decimal integer made of digits only.
func parseCount(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("missing count before /")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("count %q must be a positive whole number", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %q is too large", s)
	}
	if n <= 0 {
		return 0, fmt.Errorf("count must be > 0, got %d", n)
	}
	return n, nil
}

// parseDuration parses a Go duration ("30s", "1m30s", "250ms") or whole
// days ("7d"). A bare number without a unit is an error, even "0".
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok && days != "" {
		n, err := parseCount(days)
		if err != nil || n > int64(MaxDuration/day) {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		return time.Duration(n) * day, nil
	}
	if s == "" || strings.IndexFunc(s, isUnitLetter) < 0 {
		return 0, fmt.Errorf("duration %q needs a unit, like 30s", s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return d, nil
}

// MaxDuration is the longest duration any field accepts before its own
// range check: ten years, far below time.Duration's limit.
const MaxDuration = 10 * 366 * day

func isUnitLetter(r rune) bool { return r >= 'a' && r <= 'z' || r == 'µ' || r == 'μ' }

// fmtDuration prints whole days as "Nd" and other durations as Go does.
func fmtDuration(d time.Duration) string {
	if d >= day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	return d.String()
}

// errorf returns an error whose message carries the package prefix.
func errorf(format string, args ...any) error {
	return fmt.Errorf("limits: "+format, args...)
}
