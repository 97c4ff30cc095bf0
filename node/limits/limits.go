package limits

import (
	"fmt"
	"strconv"
	"time"

	"github.com/weir-rl/weir/bucket"
)

// Kind says what a limit counts: requests over time or requests in flight.
type Kind uint8

const (
	// KindRate limits requests over time with one of the bucket algorithms.
	// It is the default kind.
	KindRate Kind = iota
	// KindConcurrency limits requests in flight with leases (permits).
	KindConcurrency
)

// String returns the word used in the limits file: "rate" or "concurrency".
func (k Kind) String() string {
	switch k {
	case KindRate:
		return "rate"
	case KindConcurrency:
		return "concurrency"
	default:
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
}

// Policy is what a non-owner does for a limit when the key's owner cannot
// be reached (the on_owner_unreachable field).
type Policy uint8

const (
	// PolicyLocal decides from a local bucket whose capacity and rate are the
	// limit's divided by the number of known members. It is the default.
	PolicyLocal Policy = iota
	// PolicyOpen allows every request.
	PolicyOpen
	// PolicyClosed refuses every request with "limiter unavailable"
	// (HTTP 503, gRPC Unavailable).
	PolicyClosed
)

// String returns the word used in the limits file: "local", "open" or "closed".
func (p Policy) String() string {
	switch p {
	case PolicyLocal:
		return "local"
	case PolicyOpen:
		return "open"
	case PolicyClosed:
		return "closed"
	default:
		return "policy(" + strconv.Itoa(int(p)) + ")"
	}
}

// ParsePolicy parses the on_owner_unreachable words "local", "open" and
// "closed" (exact, lower case).
func ParsePolicy(s string) (Policy, error) {
	p, err := parsePolicy(s)
	if err != nil {
		return 0, errorf("%w", err)
	}
	return p, nil
}

func parsePolicy(s string) (Policy, error) {
	switch s {
	case "local":
		return PolicyLocal, nil
	case "open":
		return PolicyOpen, nil
	case "closed":
		return PolicyClosed, nil
	}
	return 0, fmt.Errorf("unknown on_owner_unreachable %q (want local, open or closed)", s)
}

// Queue bounds the wait queue of a concurrency limit. The zero value means
// no queue: an acquire that finds no free permit is refused at once.
type Queue struct {
	// Length is the most acquires that may wait for a permit per
	// (limit, key); 0 means none may wait. Range 0..MaxQueueLength.
	Length int
	// MaxWait caps how long one acquire may wait, whatever the caller asks.
	// It is > 0 when Length > 0, and at most MaxQueueWait.
	MaxWait time.Duration
}

// Limit is one named rule of the limits file. The fields that matter depend
// on Kind: Bucket for KindRate; Permits, LeaseTTL, MaxLeaseTTL, Queue and
// Strict for KindConcurrency. The others are zero. A Limit returned by Parse
// has been fully validated.
type Limit struct {
	// Name is what callers send; unique within a file, 1..MaxNameLen
	// characters from [A-Za-z0-9._-], compared case-sensitively.
	Name string
	// Kind is KindRate (the default) or KindConcurrency.
	Kind Kind

	// Bucket is the algorithm and its parameters (KindRate only). It has
	// passed bucket.Limit.Validate.
	Bucket bucket.Limit

	// Permits is the number of leases that may be held at once per key
	// (KindConcurrency only), 1..MaxPermits.
	Permits int64
	// LeaseTTL is the lease lifetime given when the caller asks for none
	// (KindConcurrency only), MinLeaseTTL..MaxLeaseTTLLimit.
	LeaseTTL time.Duration
	// MaxLeaseTTL caps the lifetime a caller may ask for (KindConcurrency
	// only). It defaults to 10 x LeaseTTL, at most MaxLeaseTTLLimit and never
	// below LeaseTTL; when set it must lie in LeaseTTL..MaxLeaseTTLLimit.
	MaxLeaseTTL time.Duration
	// Queue bounds waiting acquires (KindConcurrency only).
	Queue Queue
	// Strict is the concurrency limit's strict flag (KindConcurrency only,
	// default false). The lease and node packages define what it enforces;
	// this package only carries it.
	Strict bool

	// Allotments is the limit's allotment policy (a token_bucket rate limit
	// only): off (the zero value) or auto.
	Allotments Allotments

	// OnOwnerUnreachable is the policy of a non-owner when the owner cannot
	// be reached. The default is PolicyLocal.
	OnOwnerUnreachable Policy
	// Shadow, when true, makes the limit decide and count but always allow
	// (a dark launch). The default is false.
	Shadow bool

	// Line is the line of the file where this limit starts (its list item),
	// for messages. It is 0 for a Limit not read from a file.
	Line int
	// Inline marks a limit built by ParseInline from a caller's parameters
	// rather than read from the file.
	Inline bool
}

// Allotments says whether a limit's hot keys may be decided from
// allotments: slices of a bucket its owner debits at once and hands to a
// node (or a trusted client) that decides the key's takes in its own
// memory (package allot). The zero value is off.
type Allotments struct {
	// Auto lets a node ask a key's owner for an allotment once the key's
	// demand at that node reaches Threshold (allotments: auto). Default
	// off.
	Auto bool
	// Threshold is the demand, in tokens per second at one node, from
	// which it asks (allotment_threshold, a rate such as 50/s). Default
	// 50/s.
	Threshold float64
	// Horizon is how much of a node's demand one allotment covers
	// (allotment_horizon). Default 50ms, in [1ms, 10s].
	Horizon time.Duration
	// TTL is an allotment's life before the holder must refresh it
	// (allotment_ttl). Default 2s, in [100ms, 10m] and at least twice
	// Horizon.
	TTL time.Duration
}

// Allotment defaults and bounds (the limits file's allotment fields).
const (
	DefaultAllotmentThreshold = 50.0
	DefaultAllotmentHorizon   = 50 * time.Millisecond
	DefaultAllotmentTTL       = 2 * time.Second
	MinAllotmentHorizon       = time.Millisecond
	MaxAllotmentHorizon       = 10 * time.Second
	MinAllotmentTTL           = 100 * time.Millisecond
	MaxAllotmentTTL           = 10 * time.Minute
)

// MaxAllotment bounds one allotment of l: a quarter of its capacity, at
// least one token, so no holder takes more than a share.
func (l *Limit) MaxAllotment() int64 { return max(1, l.Bucket.Capacity/4) }

// File is a parsed, validated limits file. A *File returned by Parse, Load
// or Default is immutable: it, its Limits and the Limits' fields must not be
// modified, and it is then safe for concurrent reads.
type File struct {
	// Version is the file's version (>= 0), reported with every decision
	// and gossiped between nodes so that a mismatch is visible.
	Version int64
	// Limits are the named limits in file order.
	Limits []Limit
	// InlineLimits, when true, lets callers send capacities and rates for
	// limits the file does not name. The default is false.
	InlineLimits bool
	// Source says where the file came from: a path, or "embedded default".
	Source string

	index map[string]int // Name -> position in Limits; built by Parse
	sum   [32]byte       // SHA-256 of the bytes parsed; lets the Reloader skip unchanged files
}

// Lookup returns the limit with the given name, or false. It takes constant
// time (a map built by Parse) and does not allocate. The returned Limit
// points into f and must not be modified. Lookup on a nil *File reports
// false.
func (f *File) Lookup(name string) (*Limit, bool) {
	if f == nil {
		return nil, false
	}
	i, ok := f.index[name]
	if !ok {
		return nil, false
	}
	return &f.Limits[i], true
}

// RateBucket returns the bucket policy of the rate limit named name, or
// false when f has no rate limit of that name: the policy handed-over and
// replicated bucket states are merged under.
func (f *File) RateBucket(name string) (bucket.Limit, bool) {
	l, ok := f.Lookup(name)
	if !ok || l.Kind != KindRate {
		return bucket.Limit{}, false
	}
	return l.Bucket, true
}

// MergeBucket is the policy a handed-over or replicated bucket of limit
// name is merged under (bucket.Store.MergeAt): the file's rate limit of
// that name; else, when the file allows inline limits, the limit the
// bucket carries (an inline limit's definition, travelling with its
// state), to be kept with it (carry). A bucket of neither is refused.
func (f *File) MergeBucket(name string, carried bucket.Limit) (l bucket.Limit, carry, ok bool) {
	if l, ok := f.Lookup(name); ok {
		return l.Bucket, false, l.Kind == KindRate
	}
	if !f.InlineLimits || carried == (bucket.Limit{}) || carried.Validate() != nil {
		return bucket.Limit{}, false, false
	}
	return carried, true, true
}

// Names returns the limit names in file order, in a new slice.
func (f *File) Names() []string {
	if f == nil {
		return nil
	}
	names := make([]string, len(f.Limits))
	for i := range f.Limits {
		names[i] = f.Limits[i].Name
	}
	return names
}
