package envoyconf

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-rl/weir/bucket"
)

// Unit is a rate limit's unit, as in envoy.service.ratelimit.v3
// RateLimitResponse.RateLimit.Unit; the numbers are the proto's.
type Unit int32

// The units of envoyproxy/ratelimit.
const (
	UnitSecond Unit = 1
	UnitMinute Unit = 2
	UnitHour   Unit = 3
	UnitDay    Unit = 4
	UnitMonth  Unit = 5
	UnitYear   Unit = 6
	UnitWeek   Unit = 7
)

// units maps the upper-case names of the file to units.
var units = map[string]Unit{
	"SECOND": UnitSecond, "MINUTE": UnitMinute, "HOUR": UnitHour, "DAY": UnitDay,
	"WEEK": UnitWeek, "MONTH": UnitMonth, "YEAR": UnitYear,
}

// Duration is the length of one period of u: a month is 30 days and a year
// 365, as envoyproxy/ratelimit counts them.
func (u Unit) Duration() time.Duration {
	switch u {
	case UnitSecond:
		return time.Second
	case UnitMinute:
		return time.Minute
	case UnitHour:
		return time.Hour
	case UnitDay:
		return 24 * time.Hour
	case UnitWeek:
		return 7 * 24 * time.Hour
	case UnitMonth:
		return 30 * 24 * time.Hour
	case UnitYear:
		return 365 * 24 * time.Hour
	}
	return 0
}

func (u Unit) calendar() bucket.Calendar {
	switch u {
	case UnitSecond:
		return bucket.Second
	case UnitMinute:
		return bucket.Minute
	case UnitHour:
		return bucket.Hour
	case UnitDay:
		return bucket.Day
	case UnitWeek:
		return bucket.Week
	case UnitMonth:
		return bucket.Days30
	}
	return bucket.Days365
}

// RateLimit is a descriptor's rate_limit block.
type RateLimit struct {
	// Name is rate_limit.name, "" when absent; replaces refers to it.
	Name string
	// Unit is the period; zero for an unlimited rate limit.
	Unit Unit
	// RequestsPerUnit is the limit per Unit; 0 denies every request.
	RequestsPerUnit uint32
	// Unlimited marks a rate limit that allows everything and counts nothing.
	Unlimited bool
	// Replaces names the rate limits this one drops from a request that
	// matches both.
	Replaces []string
	// Algorithm is the Weir algorithm (rate_limit.weir.algorithm); default
	// bucket.FixedWindow.
	Algorithm bucket.Algorithm
	// Burst is the capacity of a token_bucket or gcra rule
	// (rate_limit.weir.burst); default RequestsPerUnit.
	Burst int64
	// OnOwnerUnreachable is "local" (the default), "open" or "closed".
	OnOwnerUnreachable string
}

// Rule is a configured descriptor that carries a rate_limit.
type Rule struct {
	// ID is the rule's full key as envoyproxy/ratelimit names it in its
	// stats: the domain and each level's key or key_value, joined by "."
	// ("messaging.message_type_marketing.to_number"). Unique in a Config.
	ID string
	// Domain is the file's domain.
	Domain string
	// Limit is the rate_limit block.
	Limit RateLimit
	// ShadowMode decides and counts but always answers OK.
	ShadowMode bool
	// DetailedMetric and ValueToMetric are carried for metrics; Weir's
	// metrics are labelled by rule, never by value, so they change nothing.
	DetailedMetric, ValueToMetric bool
	// File and Line are where the descriptor starts.
	File string
	Line int
}

// LimitName is the name under which the node registers the rule's Weir
// limit: "envoy:" and the ID. It cannot clash with a limits file name,
// which has no ':'.
func (r *Rule) LimitName() string { return "envoy:" + r.ID }

// Capacity is the most one request may cost: the burst of a token_bucket or
// gcra rule, else RequestsPerUnit.
func (r *Rule) Capacity() int64 {
	if r.Limit.Burst > 0 {
		return r.Limit.Burst
	}
	return int64(r.Limit.RequestsPerUnit)
}

// Bucket returns the Weir limit of the rule. It is meaningful only for a
// limited rule with RequestsPerUnit >= 1.
func (r *Rule) Bucket() bucket.Limit {
	l := r.Limit
	rpu := int64(l.RequestsPerUnit)
	switch l.Algorithm {
	case bucket.TokenBucket, bucket.GCRA:
		capacity := l.Burst
		if capacity == 0 {
			capacity = rpu
		}
		return bucket.Limit{Algorithm: l.Algorithm, Capacity: capacity, Rate: bucket.Rate{N: rpu, Per: l.Unit.Duration()}}
	case bucket.SlidingWindow:
		return bucket.Limit{Algorithm: bucket.SlidingWindow, Capacity: rpu, Window: l.Unit.Duration()}
	}
	return bucket.Limit{Algorithm: bucket.FixedWindow, Capacity: rpu, Calendar: l.Unit.calendar()}
}

// Entry is one key and value of a request descriptor.
type Entry struct {
	Key, Value string
}

// level is one descriptor list: its entries by key or key_value, and its
// wildcard values in file order.
type level struct {
	byKey     map[string]*desc
	wildcards []wildcard
}

type wildcard struct {
	finalKey string   // key_value with '*'
	parts    []string // finalKey split on '*'
}

// desc is one configured descriptor.
type desc struct {
	rule     *Rule // nil: no rate_limit
	children level
	share    bool // share_threshold
	key      string
}

// Config is a parsed, validated set of files: at most one per domain. It is
// immutable and safe for concurrent use.
type Config struct {
	domains map[string]*level
	rules   []*Rule
}

// Rules returns every rule with a rate_limit, in file order.
func (c *Config) Rules() []*Rule {
	if c == nil {
		return nil
	}
	return slices.Clone(c.rules)
}

// Domains returns the configured domains, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// Match is the answer to a descriptor.
type Match struct {
	// Rule is the rule that applies, nil when none does.
	Rule *Rule
	// Entries are the entries that name the rule's bucket: the
	// descriptor's, with the value of an entry matched by a wildcard with
	// share_threshold replaced by that wildcard.
	Entries []Entry
}

// Match returns the rule that envoyproxy/ratelimit applies to a descriptor
// with these entries in domain (see the package doc). An unknown domain
// and an unmatched descriptor give a Match with a nil Rule. It does not
// allocate unless a share_threshold wildcard matched.
func (c *Config) Match(domain string, entries []Entry) Match {
	if c == nil {
		return Match{}
	}
	lv := c.domains[domain]
	if lv == nil {
		return Match{}
	}
	var shared map[int]string
	var found *Rule
	for i, e := range entries {
		finalKey := e.Key + "_" + e.Value
		next := lv.byKey[finalKey]
		var wild string
		if next == nil {
			for _, w := range lv.wildcards {
				if wildcardMatch(w.parts, finalKey) {
					next, wild = lv.byKey[w.finalKey], w.finalKey
					break
				}
			}
		}
		if next == nil {
			next = lv.byKey[e.Key]
		}
		if next == nil {
			break
		}
		if wild != "" && next.share {
			if shared == nil {
				shared = make(map[int]string)
			}
			shared[i] = strings.TrimPrefix(wild, e.Key+"_")
		}
		if next.rule != nil && i == len(entries)-1 {
			found = next.rule
		}
		if len(next.children.byKey) == 0 {
			break
		}
		lv = &next.children
	}
	if found == nil {
		return Match{}
	}
	if len(shared) == 0 {
		return Match{Rule: found, Entries: entries}
	}
	out := slices.Clone(entries)
	for i, v := range shared {
		out[i].Value = v
	}
	return Match{Rule: found, Entries: out}
}

// wildcardMatch reports whether value matches a pattern split on '*', each
// '*' matching any run of characters (envoyproxy/ratelimit's matcher).
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	fixed := 0
	for _, p := range parts {
		fixed += len(p)
	}
	if len(value) < fixed {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// String describes the rule for logs: its ID and limit.
func (r *Rule) String() string {
	if r.Limit.Unlimited {
		return r.ID + " (unlimited)"
	}
	return fmt.Sprintf("%s (%d per %s)", r.ID, r.Limit.RequestsPerUnit, strings.ToLower(unitName(r.Limit.Unit)))
}

func unitName(u Unit) string {
	for n, v := range units {
		if v == u {
			return n
		}
	}
	return "UNKNOWN"
}
