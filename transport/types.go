package transport

import (
	"context"
	"time"
)

// Op is the atomic step a Request asks of the owner. The zero Op is invalid.
type Op uint8

const (
	// OpTake spends every check of the request or none of them.
	OpTake Op = iota + 1
	// OpRefund gives back cost that an earlier take spent (the undo of a
	// multi-owner take whose other checks were denied).
	OpRefund
	// OpAcquire asks for one concurrency permit for Checks[0].
	OpAcquire
	// OpRenew extends the lease named by LeaseID.
	OpRenew
	// OpRelease gives back the lease named by LeaseID.
	OpRelease
	// OpPull asks the receiver to hand over its state for Checks (limit and
	// key; Cost is ignored) at once, in Reply.Entries, and to stop deciding
	// those keys. A new owner sends it on its first miss after a ring
	// change, so it never starts a moved bucket from full.
	OpPull
)

var opNames = [...]string{"invalid", "take", "refund", "acquire", "renew", "release", "pull"}

// String returns the lower-case name of the op ("take", "refund", ...).
func (o Op) String() string {
	if !o.Valid() {
		return opNames[0]
	}
	return opNames[o]
}

// Valid reports whether o is one of the defined ops.
func (o Op) Valid() bool { return o >= OpTake && o <= OpPull }

// Check names one bucket, (Limit, Key), and the Cost to spend or refund.
// Inline, when not nil, carries the parameters of an inline limit named
// Limit, for the owner to validate and decide with.
type Check struct {
	Limit  string
	Key    string
	Cost   int64
	Inline *Inline
}

// Inline is an inline limit's parameters as the caller sent them, with
// the limits file's field names; 0 or "" is a field not given. transport
// only carries them.
type Inline struct {
	Algorithm string
	Capacity  int64
	Burst     int64
	Limit     int64
	Rate      string
	Window    string
}

// Request is one atomic step at the owner. Which fields matter depends on
// Op: Checks for take and refund (all in one owner's keyspace), Checks[0]
// (limit and key) plus Holder, TTL and Wait for acquire, LeaseID and TTL for
// renew, LeaseID for release. Epoch is the sender's ring epoch, so the owner
// can tell a stale view from a current one.
//
// TTL and Wait are relative durations; a zero TTL means the limit's
// lease_ttl and a zero Wait means "do not queue". A request with Wait > 0
// is never batched with others (see Pool.Do).
type Request struct {
	Op      Op
	Checks  []Check
	Epoch   uint64
	LeaseID string
	Holder  string
	TTL     time.Duration
	Wait    time.Duration
	// Proxied marks a request that a non-owner already passed on once to
	// the owner in its view; the receiver must not pass it on again, so a
	// request crosses at most two hops while views disagree.
	Proxied bool
	// RequestID is the caller's id of a take (at most 32 bytes; empty for
	// none): the owner answers a repeated id with its first decision
	// instead of spending twice. Forwards and proxies carry it unchanged.
	RequestID string
}

// Result is the owner's decision for one check. All durations were
// computed by the owner from one reading of its own clock.
type Result struct {
	Allowed    bool
	Remaining  int64
	Capacity   int64
	RetryAfter time.Duration // zero when allowed
	ResetAfter time.Duration // until the bucket is full again
	Window     time.Duration // the policy window (RateLimit-Policy w=)
	// Run, DecidedAt (Unix ns) and Bucket are the decision's evidence
	// (api.Evidence).
	Run       string
	DecidedAt int64
	Bucket    uint64
}

// Grant is the lease part of a Reply, set for acquire and renew.
type Grant struct {
	Granted    bool
	ID         string
	Fencing    uint64 // strictly increases per (limit, key)
	TTL        time.Duration
	RetryAfter time.Duration // for a refusal: a hint of when a permit may free
	Permits    int64         // the limit's permit count
}

// Reply is the owner's answer to one Request.
//
// ErrCode and ErrDetail carry a semantic error of the owner (an unknown
// limit, an unknown lease, ...) back to the caller unchanged; transport does
// not interpret them, 0 meaning none. NotOwner says the owner's ring does not
// assign the key to it: the caller should fall back or retry after its ring
// catches up; Epoch is then the owner's ring epoch.
type Reply struct {
	Results      []Result // one per check, in request order (take, refund)
	ErrCode      uint8
	ErrDetail    string
	NotOwner     bool
	Epoch        uint64
	RulesVersion int64
	Lease        Grant
	Entries      []HandoffEntry // pull: the state handed over
}

// HandoffKind says what a HandoffEntry holds.
type HandoffKind uint8

const (
	// HandoffBucket is the state of one rate-limit bucket.
	HandoffBucket HandoffKind = iota + 1
	// HandoffLease is the state of one concurrency lease (or lease table).
	HandoffLease
)

// HandoffEntry is the state of one bucket or lease moving to a new owner
// (or replicated to the member that keeps a replica). Bucket is set for
// HandoffBucket, Lease for HandoffLease. Both hold relative quantities
// (tokens as of now, time until full, remaining lease time), never the
// sender's absolute timestamps, so that clock skew between nodes cannot
// mint tokens.
type HandoffEntry struct {
	Kind   HandoffKind
	Limit  string
	Key    string
	Bucket BucketState
	Lease  LeaseState
}

// BucketState is a bucket's state on the wire, field for field the
// node's bucket.Snapshot (transport does not import bucket).
type BucketState struct {
	Algorithm uint8
	Full      bool
	Count     int64
	Frac      int64
	Prev      int64
	Ahead     time.Duration
	Since     time.Duration
	Left      time.Duration
	UntilFull time.Duration
}

// LeaseState is one lease on the wire (the node's lease.Snapshot) and the
// sender's fencing floor.
type LeaseState struct {
	ID          string
	Holder      string
	Fencing     uint64
	TTL         time.Duration
	Remaining   time.Duration
	NextFencing uint64
}

// Handler is what the peer Server needs from the node that owns buckets.
// It is implemented by package node; transport never imports node.
//
// Both methods are called concurrently from many gRPC goroutines. from is
// the sending node's name as it announced itself (authenticated only in
// that the sender holds the cluster secret).
type Handler interface {
	// Serve performs each request as one atomic step at this node and
	// returns exactly one Reply per Request, in the same order. Requests
	// in one call are independent of each other; Serve must not block on
	// one request for long, since the replies for the whole batch are
	// sent together (requests with Wait > 0 arrive alone). ctx carries the
	// forward deadline of the batch.
	Serve(ctx context.Context, from string, reqs []Request) []Reply
	// Handoff stores the entries, which describe keys this node now owns.
	// An error is returned to the sender as a failed handoff.
	Handoff(ctx context.Context, from string, entries []HandoffEntry) error
	// Replicate stores the entries as replica state of keys that member
	// from owns, and drops the replicas of the keys in dropped (Limit and
	// Key; Cost is unused).
	Replicate(ctx context.Context, from string, entries []HandoffEntry, dropped []Check) error
}
