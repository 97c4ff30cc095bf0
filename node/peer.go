package node

import (
	"context"
	"errors"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/transport"
)

// peerHandler is the node's face to its peers: it implements
// transport.Handler by deciding forwarded steps with the node's engine and
// lease table, placed by the cluster's rules (placement.Snapshot.Serve).
// It is the node's own adapter, built by startCluster; the cluster itself
// holds neither the engine nor the node.
type peerHandler struct {
	n *Node
	c *cluster
}

var _ transport.Handler = peerHandler{}

// Serve implements transport.Handler: the owner's side of forwards.
func (h peerHandler) Serve(ctx context.Context, from string, reqs []transport.Request) []transport.Reply {
	out := make([]transport.Reply, len(reqs))
	f := h.n.eng.limits()
	for i, r := range reqs {
		out[i] = h.serveOne(ctx, f, from, r)
		out[i].Epoch = h.c.ring.View().Epoch
		out[i].RulesVersion = f.Version
	}
	return out
}

// Handoff implements transport.Handler: state pushed by a previous owner.
func (h peerHandler) Handoff(_ context.Context, _ string, entries []transport.HandoffEntry) error {
	h.c.takeIn(entries)
	return nil
}

// Replicate implements transport.Handler: replica state of keys the
// sender owns. A node with replication off refuses it.
func (h peerHandler) Replicate(_ context.Context, from string, entries []transport.HandoffEntry, dropped []transport.Check) error {
	if h.c.replicas == nil {
		return errors.New("node: replication is off on this node")
	}
	h.c.replicaIn(from, entries, dropped)
	return nil
}

func (h peerHandler) serveOne(ctx context.Context, f *limits.File, from string, r transport.Request) transport.Reply {
	switch r.Op {
	case transport.OpPull:
		return h.c.servePull(from, r)
	case transport.OpRefund:
		h.n.eng.store.RefundAt(h.c.now(), h.n.eng.refundChecks(f, fromTransport(r.Checks)))
		return transport.Reply{}
	case transport.OpTake:
		return h.serveTake(ctx, f, from, r)
	default:
		return h.serveLease(ctx, f, from, r)
	}
}

// serveTake decides a forwarded take if this node may decide every key,
// passes it on once if another member does, and says NotOwner otherwise
// (the sender then decides from its own ceiling).
func (h peerHandler) serveTake(ctx context.Context, f *limits.File, from string, r transport.Request) transport.Reply {
	c := h.c
	checks := fromTransport(r.Checks)
	snap := c.placement()
	now := c.now()
	var target placement.Placement
	pullFrom := ""
	for i, ch := range checks {
		p := snap.Serve(now, ch.Limit, ch.Key, from, r.Proxied, c.mark(ch.Limit, ch.Key))
		if p.Kind == placement.Ceiling {
			return transport.Reply{NotOwner: true}
		}
		if p.Kind == placement.Here && p.Peer != "" {
			pullFrom = p.Peer
		}
		switch {
		case i == 0:
			target = p
		case p.Kind == placement.Replica && target.Kind == placement.Here, p.Kind == placement.Here && target.Kind == placement.Replica:
			target.Kind = placement.Replica // all decided here; adopt what replicas there are
		case p.Kind != target.Kind || (p.Kind == placement.Forward && p.Peer != target.Peer):
			return transport.Reply{NotOwner: true} // the keys are decided in two places
		}
	}
	if target.Kind == placement.Forward {
		r.Proxied = true
		rep, err := c.pool.Do(ctx, target.Addr, r)
		if err != nil {
			return transport.Reply{NotOwner: true}
		}
		c.m.proxied.Inc()
		return rep
	}
	if !c.pull(ctx, checks, pullFrom, h.n.eng.store.Has, target.Kind == placement.Replica) {
		return transport.Reply{NotOwner: true}
	}
	res, _, err := h.n.eng.ownerTakeOnce(f, checks, r.RequestID)
	if errors.Is(err, errNotOwner) {
		return transport.Reply{NotOwner: true}
	}
	if err != nil {
		return errReply(err)
	}
	rep := transport.Reply{Results: make([]transport.Result, len(res))}
	for i, x := range res {
		rep.Results[i] = transport.Result{
			Allowed: x.Allowed, Remaining: x.Remaining, Capacity: x.Capacity,
			RetryAfter: x.RetryAfter, ResetAfter: x.ResetAfter, Window: x.Window,
		}
		if ev := x.Evidence; ev.Run != "" {
			rep.Results[i].Run, rep.Results[i].DecidedAt, rep.Results[i].Bucket = ev.Run, ev.DecidedAt.UnixNano(), ev.Bucket
		}
	}
	return rep
}

// serveLease is the owner's side of forwarded lease operations.
func (h peerHandler) serveLease(ctx context.Context, f *limits.File, from string, r transport.Request) transport.Reply {
	n := h.n
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
	switch r.Op {
	case transport.OpAcquire:
		req := api.AcquireRequest{Limit: limit, Key: key, Holder: r.Holder, TTL: r.TTL, Wait: r.Wait}
		l, err := n.validateAcquire(f, req)
		if err != nil {
			return errReply(err)
		}
		resp, err := n.acquireOwned(ctx, l, req)
		if err != nil {
			return errReply(err)
		}
		return transport.Reply{Lease: transport.Grant{
			Granted: resp.Granted, ID: resp.ID, Fencing: resp.FencingToken,
			TTL: resp.TTL, RetryAfter: resp.RetryAfter, Permits: resp.Permits,
		}}
	case transport.OpRenew:
		l, _, err := leaseLimit(f, r.LeaseID)
		if err != nil {
			return errReply(err)
		}
		ttl, err := n.leases.renew(l, r.LeaseID, r.TTL)
		if err != nil {
			return errReply(err)
		}
		return transport.Reply{Lease: transport.Grant{Granted: true, ID: r.LeaseID, TTL: ttl}}
	default:
		n.leases.release(r.LeaseID)
		return transport.Reply{}
	}
}
