package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/engine"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/transport"
)

// Owner is the engine as the peer service serves it: the owner's steps for
// requests peers forward here, once the cluster has placed them here.
// *engine.Engine implements it.
type Owner interface {
	// Limits returns the limits in force.
	Limits() *limits.File
	// ServeTake decides a forwarded take (engine.Engine.ServeTake) for
	// the sender's caller tenant.
	ServeTake(checks []api.Check, id string, tn api.Tenant) ([]api.Result, bool, error)
	// ServeRefund gives back what a forwarded take spent.
	ServeRefund(checks []api.Check)
	// ServeAcquire grants a forwarded acquire.
	ServeAcquire(ctx context.Context, req api.AcquireRequest) (api.AcquireResponse, error)
	// ServeRenew renews a lease of the owner table.
	ServeRenew(id string, ttl time.Duration) (time.Duration, error)
	// ServeRelease releases a lease of the owner table.
	ServeRelease(id string)
	// ServeAllot grants a forwarded allotment (engine.Engine.ServeAllot).
	ServeAllot(ctx context.Context, req api.AllotRequest) (api.AllotResponse, error)
	// ServeReturn takes a forwarded allotment back.
	ServeReturn(req api.ReturnRequest) error
}

// Holdings is the owner state the cluster hands over, takes in and
// replicates. *engine.Engine implements it.
type Holdings interface {
	// HasBucket reports whether this node holds the owner bucket.
	HasBucket(limit, key string) bool
	// ExportBuckets snapshots (with remove, removes) the buckets pick selects.
	ExportBuckets(now time.Time, pick func(limit, key string) bool, remove bool) []bucket.Entry
	// ExtractBucket removes one bucket and returns its state.
	ExtractBucket(now time.Time, limit, key string) (bucket.Entry, bool)
	// SnapshotBucket returns one bucket's state without changing it.
	SnapshotBucket(now time.Time, limit, key string) (bucket.Entry, bool)
	// MergeBuckets folds handed-over states in, conservatively.
	MergeBuckets(now time.Time, entries []bucket.Entry)
	// ExportLeases snapshots (with remove, removes) the leases pick selects.
	ExportLeases(now time.Time, pick func(limit, key string) bool, remove bool) lease.Handoff
	// ImportLeases takes handed-over leases in.
	ImportLeases(now time.Time, h lease.Handoff) error
	// ExportHoldings snapshots (with remove, removes) the allotments the
	// owner granted for the buckets pick selects.
	ExportHoldings(now time.Time, pick func(limit, key string) bool, remove bool) []allot.Entry
	// ExtractHoldings removes and returns the allotments of one bucket.
	ExtractHoldings(now time.Time, limit, key string) []allot.Entry
	// ImportHoldings takes handed-over allotments in.
	ImportHoldings(now time.Time, es []allot.Entry) error
	// HasHoldings reports whether the owner granted allotments of a bucket.
	HasHoldings(limit, key string) bool
}

// peerHandler is the member's face to its peers (transport.Handler): it
// places what peers forward with the cluster's rules
// (placement.Snapshot.Serve), passes it on or pulls first when needed, and
// has the owner decide it.
type peerHandler struct {
	c *Cluster
}

var _ transport.Handler = peerHandler{}

// Serve implements transport.Handler: the owner's side of forwards. A
// node that peers forward to but that has not joined yet waits for its
// join first (awaitJoin).
func (h peerHandler) Serve(ctx context.Context, from string, reqs []transport.Request) []transport.Reply {
	out := make([]transport.Reply, len(reqs))
	version := h.c.run.Owner.Limits().Version
	if !h.c.placement().Joined() {
		h.c.awaitJoin(ctx, reqs) // once for the whole batch, whose replies go together
	}
	for i, r := range reqs {
		sctx, span := h.c.tracer.Owner(ctx, r.TraceParent, r.Op.String(), from, len(reqs))
		out[i] = h.serveOne(sctx, from, r)
		span.EndOwner(r.Checks, ownerAdmitted(r.Op, out[i]), out[i].NotOwner, out[i].ErrDetail)
		out[i].Epoch = h.c.ring.View().Epoch
		out[i].RulesVersion = version
	}
	return out
}

// ownerAdmitted reports whether an owner's step admitted what op asked,
// for its span: a take every check, an acquire its permit, an allot some
// tokens; any other op that the owner did not refuse.
func ownerAdmitted(op transport.Op, rep transport.Reply) bool {
	switch {
	case rep.ErrCode != 0 || rep.NotOwner:
		return false
	case op == transport.OpTake:
		for _, r := range rep.Results {
			if !r.Allowed {
				return false
			}
		}
		return len(rep.Results) > 0
	case op == transport.OpAcquire:
		return rep.Lease.Granted
	case op == transport.OpAllot:
		return rep.Allot.Tokens > 0
	}
	return true
}

// Handoff implements transport.Handler: state pushed by a previous owner.
func (h peerHandler) Handoff(_ context.Context, _ string, st transport.State) error {
	h.c.takeIn(st)
	return nil
}

// Replicate implements transport.Handler: replica state of keys the
// sender owns. A node with replication off refuses it.
func (h peerHandler) Replicate(_ context.Context, from string, r transport.Replica) error {
	return h.c.replicas.apply(h.c.now(), h.c.limits(), from, r)
}

// Report implements transport.Handler: this node's summary.
func (h peerHandler) Report(_ context.Context, req transport.ReportRequest) transport.Report {
	return h.c.run.Report(req)
}

func (h peerHandler) serveOne(ctx context.Context, from string, r transport.Request) transport.Reply {
	switch r.Op {
	case transport.OpPull:
		return h.c.servePull(from, r)
	case transport.OpRefund:
		h.c.run.Owner.ServeRefund(r.Checks)
		return transport.Reply{}
	case transport.OpTake:
		return h.serveTake(ctx, from, r)
	case transport.OpAllot, transport.OpReturn:
		return h.serveAllot(ctx, from, r)
	default:
		return h.serveLease(ctx, from, r)
	}
}

// serveTake decides a forwarded take if this node may decide every key,
// passes it on once if another member does, and says NotOwner otherwise
// (the sender then decides from its own ceiling). A take whose key was
// handed over between its placement and its decision is passed on once to
// the member deciding it now.
func (h peerHandler) serveTake(ctx context.Context, from string, r transport.Request) transport.Reply {
	c := h.c
	target, pullFrom, ok := c.placeTake(c.placement(), from, &r)
	if !ok {
		return transport.Reply{NotOwner: true}
	}
	if target.Kind == placement.Forward {
		return c.proxy(ctx, target, r)
	}
	if err := c.pull(ctx, r.Checks, pullFrom, c.run.Holdings.HasBucket, target.Kind == placement.Replica); err != nil {
		return pullFailed(err)
	}
	if c.expired(&r) {
		return transport.Reply{Expired: true}
	}
	res, _, err := c.run.Owner.ServeTake(r.Checks, r.RequestID, r.Tenant)
	if errors.Is(err, engine.ErrNotOwner) {
		// Handed over since it was placed here (a pull took the key
		// away): the member that pulled it decides it now, with the
		// debt. Answered NotOwner, the sender would grant from its ceiling
		// while that member grants from the bucket.
		if target, _, ok := c.placeTake(c.placement(), from, &r); ok && target.Kind == placement.Forward {
			return c.proxy(ctx, target, r)
		}
		return transport.Reply{NotOwner: true}
	}
	if err != nil {
		return errReply(err)
	}
	return transport.Reply{Results: res}
}

// placeTake places a forwarded take's keys with snap (Serve): where they
// are all decided, and the member to pull their state from first (""
// for none). ok is false when they are not decided in one place, or a
// key is placed on a ceiling: the sender falls back.
func (c *Cluster) placeTake(snap *placement.Snapshot, from string, r *transport.Request) (placement.Placement, string, bool) {
	now := c.now()
	var target placement.Placement
	pullFrom := ""
	for i, ch := range r.Checks {
		p := snap.Serve(now, ch.Limit, ch.Key, from, r.Proxied, c.mark(ch.Limit, ch.Key))
		if p.Kind == placement.Ceiling {
			return placement.Placement{}, "", false
		}
		if p.Kind == placement.Here && p.Peer != "" {
			pullFrom = p.Peer
		}
		switch {
		case i == 0:
			target = p
		case p.DecidesHere() && target.DecidesHere():
			if p.Kind == placement.Replica {
				target.Kind = placement.Replica // all decided here; adopt what replicas there are
			}
		case p.Kind != target.Kind || (p.Kind == placement.Forward && p.Peer != target.Peer):
			return placement.Placement{}, "", false // the keys are decided in two places
		}
	}
	return target, pullFrom, true
}

// proxy passes a forwarded take on, once, to the member target names.
func (c *Cluster) proxy(ctx context.Context, target placement.Placement, r transport.Request) transport.Reply {
	r.Proxied = true
	ctx, span, parent := c.tracer.Forward(ctx, target.Addr, r.Op.String())
	r.TraceParent = parent
	rep, err := c.pool.Do(ctx, target.Addr, r)
	span.EndForward(err, err == nil && rep.NotOwner)
	if err != nil {
		return proxyFailed(err)
	}
	c.m.proxied.Inc()
	return rep
}

// awaitJoin waits for this node to route by its ring, for at most half of
// what is left of the earliest deadline among reqs (not at all when none
// has one). A peer forwards here only once it sees this node alive, so
// this node's own join is under way: its view is still itself alone, in
// which it may decide nothing (placement's join rule), and answered
// NotOwner at once, every sender would grant the keys it now owns from
// local ceilings while their previous owner still grants from their
// buckets. Half the deadline leaves the senders the other half to fall
// back in time when the join takes longer.
func (c *Cluster) awaitJoin(ctx context.Context, reqs []transport.Request) {
	var deadline time.Time
	for _, r := range reqs {
		if !r.Deadline.IsZero() && (deadline.IsZero() || r.Deadline.Before(deadline)) {
			deadline = r.Deadline
		}
	}
	if deadline.IsZero() {
		return
	}
	wait := time.NewTimer(time.Until(deadline) / 2)
	defer wait.Stop()
	tick := time.NewTicker(joinPoll)
	defer tick.Stop()
	for !c.placement().Joined() {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
			return
		case <-tick.C:
		}
	}
}

// joinPoll is how often awaitJoin looks at the join state: memberlist
// reports it by a flag, not an event.
const joinPoll = time.Millisecond

// serveAllot is the owner's side of a forwarded allotment or return,
// placed like a take: decided here (pulling the key's state first when the
// sender's view moved it here), passed on once to the owner in this
// node's view, or NotOwner.
func (h peerHandler) serveAllot(ctx context.Context, from string, r transport.Request) transport.Reply {
	if len(r.Checks) != 1 {
		return errReply(api.Errorf(api.CodeInvalid, "an allotment names one bucket"))
	}
	c := h.c
	ch := r.Checks[0]
	p := c.placement().Serve(c.now(), ch.Limit, ch.Key, from, r.Proxied, c.mark(ch.Limit, ch.Key))
	switch {
	case p.Kind == placement.Forward:
		r.Proxied = true
		rep, err := c.pool.Do(ctx, p.Addr, r)
		if err != nil {
			return proxyFailed(err)
		}
		c.m.proxied.Inc()
		return rep
	case !p.DecidesHere():
		return transport.Reply{NotOwner: true}
	}
	pullFrom := ""
	if p.Kind == placement.Here {
		pullFrom = p.Peer
	}
	if err := c.pull(ctx, r.Checks, pullFrom, c.run.Holdings.HasBucket, p.Kind == placement.Replica); err != nil {
		return pullFailed(err)
	}
	if r.Op == transport.OpReturn {
		if err := c.run.Owner.ServeReturn(api.ReturnRequest{Limit: ch.Limit, Key: ch.Key, Holder: r.Holder, Unspent: r.Unspent, Seq: r.Seq}); err != nil {
			return errReply(err)
		}
		return transport.Reply{}
	}
	if c.expired(&r) {
		return transport.Reply{Expired: true}
	}
	resp, err := c.run.Owner.ServeAllot(ctx, api.AllotRequest{
		Limit: ch.Limit, Key: ch.Key, Holder: r.Holder, Want: r.Want, Demand: r.Demand, Unspent: r.Unspent, Seq: r.Seq,
	})
	if errors.Is(err, engine.ErrNotOwner) {
		return transport.Reply{NotOwner: true}
	}
	if err != nil {
		return errReply(err)
	}
	return transport.Reply{Allot: resp}
}

// serveLease is the owner's side of forwarded lease operations.
func (h peerHandler) serveLease(ctx context.Context, from string, r transport.Request) transport.Reply {
	var limit, key string
	switch r.Op {
	case transport.OpAcquire:
		if len(r.Checks) != 1 {
			return errReply(api.Errorf(api.CodeInvalid, "acquire needs one check"))
		}
		limit, key = r.Checks[0].Limit, r.Checks[0].Key
	case transport.OpRenew, transport.OpRelease:
		var ok bool
		if limit, key, ok = lease.ParseID(r.LeaseID); !ok {
			return errReply(api.Errorf(api.CodeNotFound, "lease not found: malformed id"))
		}
	default:
		return errReply(api.Errorf(api.CodeInvalid, "unknown op"))
	}
	if !h.c.placement().ServesLease(limit, key, from) {
		return transport.Reply{NotOwner: true}
	}
	owner := h.c.run.Owner
	switch r.Op {
	case transport.OpAcquire:
		if h.c.expired(&r) {
			return transport.Reply{Expired: true}
		}
		resp, err := owner.ServeAcquire(ctx, api.AcquireRequest{Limit: limit, Key: key, Holder: r.Holder, TTL: r.TTL, Wait: r.Wait})
		if err != nil {
			return errReply(err)
		}
		return transport.Reply{Lease: api.AcquireResponse{
			Granted: resp.Granted, ID: resp.ID, FencingToken: resp.FencingToken,
			TTL: resp.TTL, RetryAfter: resp.RetryAfter, Permits: resp.Permits,
		}}
	case transport.OpRenew:
		ttl, err := owner.ServeRenew(r.LeaseID, r.TTL)
		if err != nil {
			return errReply(err)
		}
		return transport.Reply{Lease: api.AcquireResponse{Granted: true, ID: r.LeaseID, TTL: ttl}}
	default:
		owner.ServeRelease(r.LeaseID)
		return transport.Reply{}
	}
}

// expired reports, and counts, a forwarded take, allotment or acquire
// that reached its owner's decision only after its sender's deadline: the
// sender has answered its caller without it, so spending for it would only
// lose tokens. The check is the last before the owner's step, on the
// transport's clock (the one its deadline is on). Refunds, returns,
// renewals and releases are never refused: undoing is right however late.
func (c *Cluster) expired(r *transport.Request) bool {
	if !r.ExpiredAt(time.Now()) {
		return false
	}
	c.m.expired.Inc()
	return true
}

// pullFailed answers a forward whose keys' state this node could not pull
// before deciding them: Expired when the member holding it (alive) did
// not answer within the forward's deadline, so the sender answers it as
// overload; NotOwner otherwise, and the sender falls back.
func pullFailed(err error) transport.Reply {
	if errors.Is(err, engine.ErrOwnerLate) {
		return transport.Reply{Expired: true}
	}
	return transport.Reply{NotOwner: true}
}

// proxyFailed answers a forward this node passed on to the owner in its
// view and got no answer for: Expired when the deadline passed first (the
// owner may be late, not gone: the sender answers overload), NotOwner
// otherwise.
func proxyFailed(err error) transport.Reply {
	if errors.Is(err, transport.ErrDeadline) || errors.Is(err, context.Canceled) {
		return transport.Reply{Expired: true}
	}
	return transport.Reply{NotOwner: true}
}

// errReply carries an owner's error back to the sender: an *api.Error
// with its code, anything else as unavailable.
func errReply(err error) transport.Reply {
	if apiErr, ok := errors.AsType[*api.Error](err); ok {
		return transport.Reply{ErrCode: uint8(apiErr.Code), ErrDetail: apiErr.Detail}
	}
	return transport.Reply{ErrCode: uint8(api.CodeUnavailable), ErrDetail: err.Error()}
}
