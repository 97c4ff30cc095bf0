package transport

import (
	"context"
	"time"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
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
	// key; Cost is ignored) at once, in Reply.State, and to stop deciding
	// those keys. A new owner sends it on its first miss after a ring
	// change, so it never starts a moved bucket from full.
	OpPull
	// OpAllot asks the owner of Checks[0] for an allotment for Holder
	// (Want, Demand, Unspent); the grant comes in Reply.Allot.
	OpAllot
	// OpReturn gives Holder's allotment of Checks[0] back (Unspent).
	OpReturn
)

var opNames = [...]string{"invalid", "take", "refund", "acquire", "renew", "release", "pull", "allot", "return"}

// String returns the lower-case name of the op ("take", "refund", ...).
func (o Op) String() string {
	if !o.Valid() {
		return opNames[0]
	}
	return opNames[o]
}

// Valid reports whether o is one of the defined ops.
func (o Op) Valid() bool { return o >= OpTake && o <= OpReturn }

// Key names one bucket, or one key of a lease table: (limit, key).
type Key struct {
	Limit, Key string
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
	Checks  []api.Check
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
	// Want, Demand, Unspent and Seq are an allotment's ask (OpAllot;
	// Unspent and Seq also OpReturn): api.AllotRequest's fields.
	Want    int64
	Demand  float64
	Unspent int64
	Seq     uint64
	// TraceParent is the W3C traceparent of the sender's forward span when
	// it is sampled, "" otherwise; the owner's span for this request is its
	// child. Each request of a batch carries its own.
	TraceParent string
	// Tenant is the take's tenant (api.TenantFrom at the sender), whose
	// new buckets the owner counts; the zero Tenant for none.
	Tenant api.Tenant
	// Deadline is when the sender stops waiting for the reply, on the
	// clock of the node that holds the Request. Pool.Do sets it to the
	// forward's deadline (sooner than any Deadline given). It crosses the
	// wire as the time left when the batch is sent, and the receiver sets
	// it to the batch's arrival plus that on its own clock, so clock skew
	// between nodes does not move it; the request's time in transit does,
	// later by that much at the receiver (docs/architecture.md §6.3). The
	// zero time means none: a sender that predates it.
	Deadline time.Time
}

// ExpiredAt reports whether r's Deadline has passed at now: its sender no
// longer waits for the reply, so the owner must not spend for it.
func (r *Request) ExpiredAt(now time.Time) bool {
	return !r.Deadline.IsZero() && !now.Before(r.Deadline)
}

// Reply is the owner's answer to one Request.
//
// ErrCode and ErrDetail carry a semantic error of the owner (an unknown
// limit, an unknown lease, ...) back to the caller unchanged; transport does
// not interpret them, 0 meaning none. NotOwner says the owner's ring does not
// assign the key to it: the caller should fall back or retry after its ring
// catches up; Epoch is then the owner's ring epoch.
//
// Results carry what the owner decided: every field of api.Result but
// Limit and Source, which the sender fills in from its own request (the
// owner's evidence has Fallback false). Lease carries Granted, ID,
// FencingToken, TTL, RetryAfter and Permits of an acquire or renew.
type Reply struct {
	Results      []api.Result // one per check, in request order (take)
	ErrCode      uint8
	ErrDetail    string
	NotOwner     bool
	Epoch        uint64
	RulesVersion int64
	Lease        api.AcquireResponse
	State        State // pull: the state handed over
	// Allot is the owner's answer to OpAllot: Tokens, TTL, RetryAfter,
	// Capacity, Window and Seq.
	Allot api.AllotResponse
	// Expired says the owner reached the request only after its Deadline
	// and refused it: nothing was spent.
	Expired bool
}

// State is owner state crossing nodes: buckets and leases moving to a new
// owner (a handoff or a pull), or replicated to the member that keeps a
// key's replica. Both are relative to the sender's now (tokens as of now,
// time until full, remaining lease time), never the sender's absolute
// timestamps, so clock skew between nodes cannot mint tokens. This file and
// convert.go are the only places that know its wire form.
type State struct {
	// Buckets are bucket states. A receiver drops one whose algorithm it
	// does not know.
	Buckets []bucket.Entry
	// Leases are leases with the sender's fencing floor.
	Leases lease.Handoff
	// Holdings are allotments the sender granted as the buckets' owner,
	// with their time left: they go with their buckets, whose capacity
	// they reduce.
	Holdings []allot.Entry
}

// Replica is a replica batch as its receiver gets it.
type Replica struct {
	// State holds the batch's leases and allotments, and those of its
	// buckets that did not come packed (a bucket that carries its own
	// limit, or every bucket from a sender speaking V1).
	State State
	// Packed holds its other buckets, checked but not decoded.
	Packed Packed
	// Dropped are the keys whose replica is to be dropped: they hold
	// nothing at their owner any more.
	Dropped []Key
}

// Len is the number of buckets, leases and holdings in s.
func (s State) Len() int { return len(s.Buckets) + len(s.Leases.Leases) + len(s.Holdings) }

// Handler is what the peer Server needs from the node that owns buckets.
// It is implemented by package node; transport never imports node.
//
// Both methods are called concurrently from many gRPC goroutines. from is
// the sending node's name as it announced itself (authenticated only in
// that the sender holds the cluster secret). The keys of a State's buckets
// may be slices of one string per call (packed.go): a handler that keeps
// a key beyond the call copies it, as bucket.Store does, or it keeps the
// whole call's keys alive.
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
	Handoff(ctx context.Context, from string, st State) error
	// Replicate stores r as replica state of keys that member from owns.
	Replicate(ctx context.Context, from string, r Replica) error
	// Report returns this node's summary for a peer that merges the
	// cluster-wide views (the Report RPC).
	Report(ctx context.Context, req ReportRequest) Report
}
