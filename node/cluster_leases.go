package node

import (
	"context"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// acquireOwned grants at this node, which owns the key. Inside a takeover
// window (placement's lease ceiling) it grants only up to a local share,
// or nothing for strict limits.
func (n *Node) acquireOwned(ctx context.Context, l *limits.Limit, req api.AcquireRequest) (api.AcquireResponse, error) {
	c := n.cl.Load()
	if c == nil {
		return n.leases.acquire(ctx, l, req)
	}
	// Right after a ring change the previous owner may still hold this
	// key's leases (a restarted owner before they are handed back): pull
	// them first, once per view change. Whether this table already holds
	// leases of the key proves nothing (it may have granted some from its
	// own partial state: jepsen's 3-leave, seed 167850, saw a restarted
	// owner stop pulling after its first grant and hold 9 of 4), so only
	// the pull's own record counts.
	// A key taken over after its owner failed starts from the replica of
	// its leases, and then needs no ceiling if that replica was current.
	adopt := c.placeLease(l.Name, req.Key).Kind == placement.Replica
	if !c.pull(ctx, []api.Check{{Limit: l.Name, Key: req.Key}}, "", pulledOnly, adopt) {
		return n.acquireFallback(ctx, l, req)
	}
	snap := c.placement()
	if left, ok := snap.LeaseCeiling(c.now(), l.Name, req.Key, l.MaxLeaseTTL, c.replicaCurrent(snap)); ok {
		if l.Strict {
			n.leases.m.denials.WithLabelValues(l.Name, denialConcurrency).Inc()
			return api.AcquireResponse{Permits: l.Permits, RetryAfter: left, Source: api.SourceOwner}, nil
		}
		shared := *l
		shared.Permits = max(1, l.Permits/int64(snap.Known()))
		return n.leases.acquire(ctx, &shared, req)
	}
	return n.leases.acquire(ctx, l, req)
}

// pulledOnly is the "holds the key" test of lease pulls: never, so that
// only the pull's record of the view change decides (see acquireOwned).
func pulledOnly(string, string) bool { return false }

// acquireFallback decides an acquire whose owner is unreachable, by the
// limit's on_owner_unreachable policy.
func (n *Node) acquireFallback(ctx context.Context, l *limits.Limit, req api.AcquireRequest) (api.AcquireResponse, error) {
	switch l.OnOwnerUnreachable {
	case limits.PolicyClosed:
		n.m.denials.WithLabelValues(l.Name, denialError).Inc()
		return api.AcquireResponse{}, api.Errorf(api.CodeUnavailable, "limit %q fails closed and its owner is unreachable", l.Name)
	case limits.PolicyOpen:
		open := *l
		open.Permits = 1 << 40 // open: effectively unbounded, still tracked for renew and release
		resp, err := n.fallbackLeases.acquire(ctx, &open, req)
		resp.Source, resp.Permits = api.SourceFallback, l.Permits
		return resp, err
	}
	share := *l
	share.Permits = max(1, l.Permits/int64(n.eng.known()))
	resp, err := n.fallbackLeases.acquire(ctx, &share, req)
	resp.Source = api.SourceFallback
	return resp, err
}

// acquireRemote forwards an acquire to the key's owner.
func (c *cluster) acquireRemote(ctx context.Context, peer string, l *limits.Limit, req api.AcquireRequest) (api.AcquireResponse, error) {
	rep, err := c.pool.Do(ctx, peer, transport.Request{
		Op:     transport.OpAcquire,
		Checks: []transport.Check{{Limit: l.Name, Key: req.Key}}, Holder: req.Holder, TTL: req.TTL, Wait: req.Wait,
	})
	if err != nil {
		return api.AcquireResponse{}, err
	}
	if rep.ErrCode != 0 {
		return api.AcquireResponse{}, &api.Error{Code: api.Code(rep.ErrCode), Detail: rep.ErrDetail}
	}
	if rep.NotOwner {
		return api.AcquireResponse{}, errNotOwner
	}
	g := rep.Lease
	return api.AcquireResponse{
		Granted: g.Granted, ID: g.ID, FencingToken: g.Fencing, TTL: g.TTL,
		Permits: g.Permits, RetryAfter: g.RetryAfter, Source: api.SourceOwner,
	}, nil
}

// leaseRemote forwards a renew or release to the lease's owner.
func (c *cluster) leaseRemote(ctx context.Context, peer string, op transport.Op, id string, ttl time.Duration) (time.Duration, error) {
	rep, err := c.pool.Do(ctx, peer, transport.Request{Op: op, LeaseID: id, TTL: ttl})
	if err != nil {
		return 0, api.Errorf(api.CodeUnavailable, "lease owner unreachable: %v", err)
	}
	if rep.ErrCode != 0 {
		return 0, &api.Error{Code: api.Code(rep.ErrCode), Detail: rep.ErrDetail}
	}
	if rep.NotOwner {
		return 0, api.Errorf(api.CodeUnavailable, "lease owner unknown while the ring settles")
	}
	return rep.Lease.TTL, nil
}

// exportLeases removes the leases whose keys pick selects and returns them
// as handoff entries by new owner.
func (c *cluster) exportLeases(v *ring.View, pick func(limit, key string) bool) map[string][]transport.HandoffEntry {
	out := map[string][]transport.HandoffEntry{}
	for _, e := range c.takeLeases(pick) {
		m, _ := v.Owner(ring.HashKey(e.Limit, e.Key))
		out[m.Name] = append(out[m.Name], e)
	}
	return out
}

// takeLeases removes the leases whose keys pick selects from the table and
// returns them as handoff entries: remaining time and the fencing floor.
func (c *cluster) takeLeases(pick func(limit, key string) bool) []transport.HandoffEntry {
	return leaseEntries(c.leases.export(c.now(), pick, true))
}

// importLeases takes in handed-over leases with their remaining time and
// raises the fencing floor above the sender's.
func (c *cluster) importLeases(entries []transport.HandoffEntry) {
	h := leaseHandoff(entries)
	if len(h.Leases) == 0 {
		return
	}
	if err := c.leases.importFrom(c.now(), h); err != nil {
		c.log.Warn("lease handoff rejected", "err", err)
	}
	if c.repl != nil {
		now := c.now()
		for _, l := range h.Leases {
			c.repl.touchLease(l.Limit, l.Key, now)
		}
	}
}

// reachable reports whether the peer answers within the forward deadline:
// the ring may still list as alive an owner this node cannot reach.
func (c *cluster) reachable(ctx context.Context, peer string) bool {
	_, err := c.pool.Do(ctx, peer, transport.Request{Op: transport.OpPull})
	return err == nil
}
