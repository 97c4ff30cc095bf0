package engine

import (
	"context"
	"errors"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/placement"
)

// Router is what the engine needs of the cluster to route a decision: where
// a key is decided, how many members share a local ceiling, the state to
// fetch before deciding a key here, and the guard that keeps a key from
// being handed over mid-step. node/cluster implements it for a cluster;
// SingleNode is a cluster of one. Methods are called concurrently.
type Router interface {
	// Place says where a take on (limit, key) is decided
	// (placement.Snapshot.Take).
	Place(limit, key string) placement.Placement
	// PlaceLease says where a lease operation on (limit, key) is decided
	// (placement.Snapshot.Lease).
	PlaceLease(limit, key string) placement.Placement
	// Known is the number of known members (alive or failed), at least
	// one: local ceilings divide a limit by it.
	Known() int
	// Prepare makes sure this node holds the state of the checks' keys
	// before it decides them here: a key held reports nil; adopt (the
	// keys were placed Replica) starts a key it holds no state for from
	// its replica. An error means a needed state could not be fetched,
	// and the checks must not be decided from fresh state: one wrapping
	// ErrOwnerLate means the member holding it is alive but did not
	// answer within ctx's deadline (overload, see Peers), any other that
	// it could not be reached.
	Prepare(ctx context.Context, checks []api.Check, adopt bool, held func(limit, key string) bool) error
	// Hold keeps the checks' keys from being handed over until release is
	// called, and reports whether this node may still decide them (false:
	// one was handed over since it was placed here).
	Hold(checks []api.Check) (release func(), ok bool)
	// LeaseCeiling reports whether (limit, key) is inside the takeover
	// window of its owner's failure (placement.Snapshot.LeaseCeiling), how
	// long the window still lasts, and the known members then.
	LeaseCeiling(limit, key string, maxTTL time.Duration) (left time.Duration, known int, ok bool)
}

// Peers forwards a step to the owner of its keys, at the peer address a
// Placement named, and waits for its answer as long as ctx allows (a
// default bound when ctx has no deadline). An error wrapping ErrOwnerLate
// means the owner gave no answer in that time, or refused the step as past
// it: the owner may be slow, not gone, and the engine does not decide the
// step from a local ceiling while the router still places it at a live
// owner (see Engine.Take). Any other error that is not an *api.Error means
// the owner could not be reached (or, ErrNotOwner, that its ring
// disagreed); the engine then answers from a local ceiling. Methods are
// called concurrently.
type Peers interface {
	// Take runs one atomic take at the owner, with the caller's request
	// id ("" for none). The results carry the owner's decision and
	// evidence, with Limit and Source set.
	Take(ctx context.Context, peer string, checks []api.Check, requestID string) ([]api.Result, bool, error)
	// Refund gives back what an earlier Take at peer spent, best effort.
	Refund(ctx context.Context, peer string, checks []api.Check)
	// Acquire asks the owner for a lease.
	Acquire(ctx context.Context, peer string, req api.AcquireRequest) (api.AcquireResponse, error)
	// Renew extends a lease at its owner. Errors are *api.Error.
	Renew(ctx context.Context, peer, id string, ttl time.Duration) (time.Duration, error)
	// Release gives a lease back at its owner. Errors are *api.Error.
	Release(ctx context.Context, peer, id string) error
	// Reachable reports whether peer answers within the forward deadline.
	Reachable(ctx context.Context, peer string) bool
	// Allot asks the owner at peer for an allotment.
	Allot(ctx context.Context, peer string, req api.AllotRequest) (api.AllotResponse, error)
	// Return gives an allotment back to the owner at peer.
	Return(ctx context.Context, peer string, req api.ReturnRequest) error
}

// Changes is told of every owner bucket and lease key whose state a step
// changed: the replication stream to successors. Called concurrently, on
// the decision path, sometimes with the lease table's lock held: it must
// be quick and must not call the engine.
type Changes interface {
	// Bucket records that the owner bucket (limit, key) changed at now.
	// after is the state an admitted take left it in (the take's
	// bucket.Decision.State): the bucket holds no debt from
	// after.FullAt() on unless it changes again, and after is its whole
	// state unless carried says it keeps an inline limit (bucket.Check.
	// Carry), which a replica needs too. after is the zero State when the
	// change was not a take (unknown: the stream looks the bucket up).
	Bucket(limit, key string, now time.Time, after bucket.State, carried bool)
	// Lease records that the leases of (limit, key) changed at now.
	Lease(limit, key string, now time.Time)
	// Sync sends the state of the owner bucket (limit, key), with the
	// allotments granted of it, to the key's successor now, and returns
	// once the successor has it: an allotment is answered only once the
	// node that takes the key over if this one fails knows of it. Nil
	// when there is nobody to tell. Called with no engine lock held.
	Sync(ctx context.Context, limit, key string) error
}

// ErrNotOwner is a forward the owner refused because its ring disagreed.
var ErrNotOwner = errors.New("engine: the owner's ring disagrees")

// ErrOwnerLate is a forward that got no answer from its owner within its
// deadline, or that the owner refused because the deadline had passed when
// it got to it. It says nothing about whether the owner is down.
var ErrOwnerLate = errors.New("engine: the owner did not answer within the deadline")

// errNoPeers is what NoPeers answers: a cluster of one has nobody to ask.
var errNoPeers = errors.New("engine: no peers in a cluster of one")

// SingleNode is the Router of a cluster of one: every key is decided here,
// one member shares a ceiling, there is never state to fetch, nothing is
// handed over and no failure opens a lease window. (groupcache's NoPeers
// is the model: a null object, not a nil.)
type SingleNode struct{}

var _ Router = SingleNode{}

// Place implements Router: here.
func (SingleNode) Place(string, string) placement.Placement {
	return placement.Placement{Kind: placement.Here}
}

// PlaceLease implements Router: here.
func (SingleNode) PlaceLease(string, string) placement.Placement {
	return placement.Placement{Kind: placement.Here}
}

// Known implements Router: one member.
func (SingleNode) Known() int { return 1 }

// Prepare implements Router: everything is held already.
func (SingleNode) Prepare(context.Context, []api.Check, bool, func(string, string) bool) error {
	return nil
}

// Hold implements Router: nothing is ever handed over.
func (SingleNode) Hold([]api.Check) (func(), bool) { return noRelease, true }

func noRelease() {}

// LeaseCeiling implements Router: no failure, no window.
func (SingleNode) LeaseCeiling(string, string, time.Duration) (time.Duration, int, bool) {
	return 0, 1, false
}

// NoPeers is the Peers of a cluster of one. SingleNode never places a key
// elsewhere, so it is never asked; if it were, every owner is unreachable.
type NoPeers struct{}

var _ Peers = NoPeers{}

// Take implements Peers: unreachable.
func (NoPeers) Take(context.Context, string, []api.Check, string) ([]api.Result, bool, error) {
	return nil, false, errNoPeers
}

// Refund implements Peers: nothing to give back.
func (NoPeers) Refund(context.Context, string, []api.Check) {}

// Acquire implements Peers: unreachable.
func (NoPeers) Acquire(context.Context, string, api.AcquireRequest) (api.AcquireResponse, error) {
	return api.AcquireResponse{}, errNoPeers
}

// Renew implements Peers: unreachable.
func (NoPeers) Renew(context.Context, string, string, time.Duration) (time.Duration, error) {
	return 0, api.Errorf(api.CodeUnavailable, "lease owner unreachable")
}

// Release implements Peers: unreachable.
func (NoPeers) Release(context.Context, string, string) error {
	return api.Errorf(api.CodeUnavailable, "lease owner unreachable")
}

// Reachable implements Peers: nobody is.
func (NoPeers) Reachable(context.Context, string) bool { return false }

// Allot implements Peers: unreachable.
func (NoPeers) Allot(context.Context, string, api.AllotRequest) (api.AllotResponse, error) {
	return api.AllotResponse{}, errNoPeers
}

// Return implements Peers: unreachable.
func (NoPeers) Return(context.Context, string, api.ReturnRequest) error { return errNoPeers }

// NoChanges is the Changes of a node that replicates nothing.
type NoChanges struct{}

var _ Changes = NoChanges{}

// Bucket implements Changes: nothing to record.
func (NoChanges) Bucket(string, string, time.Time, bucket.State, bool) {}

// Lease implements Changes: nothing to record.
func (NoChanges) Lease(string, string, time.Time) {}

// Sync implements Changes: nobody to tell.
func (NoChanges) Sync(context.Context, string, string) error { return nil }
