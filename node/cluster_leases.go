package node

import (
	"context"
	"strings"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// failure records a member that failed (not left), so that for one
// lease_ttl its keys' new owner limits grants: it cannot know which of the
// dead owner's leases are still running (docs/architecture.md §6.6).
type failure struct {
	name string
	at   time.Time
	prev *ring.View // the view in which name still owned its keys
}

// noteFailures compares two consecutive views and records members that
// went from live to dead. Called by sync with c.mu held.
func (c *cluster) noteFailures(prev, next *ring.View) {
	if prev == nil {
		return
	}
	now := c.now()
	var keep []failure
	if old := c.failures.Load(); old != nil {
		for _, f := range *old {
			// Forget records older than any lease could live.
			if now.Sub(f.at) < limits.MaxLeaseTTLLimit {
				keep = append(keep, f)
			}
		}
	}
	for _, m := range next.Members {
		if m.State != ring.Dead {
			continue
		}
		if old, ok := prev.Member(m.Name); ok && old.State.Live() {
			keep = append(keep, failure{name: m.Name, at: now, prev: prev})
		}
	}
	c.failures.Store(&keep)
}

// takeover reports whether (l, key) is inside the window after its owner
// crashed, and how long the window still lasts.
func (c *cluster) takeover(l *limits.Limit, key string) (time.Duration, bool) {
	c.sync()
	fs := c.failures.Load()
	if fs == nil {
		return 0, false
	}
	now := c.now()
	hk := ring.HashKey(l.Name, key)
	for _, f := range *fs {
		left := f.at.Add(l.MaxLeaseTTL).Sub(now)
		if left <= 0 {
			continue
		}
		if m, ok := f.prev.Owner(hk); ok && m.Name == f.name {
			return left, true
		}
	}
	return 0, false
}

// acquireOwned grants at this node, which owns the key. Inside a takeover
// window it grants only up to a local ceiling, or nothing for strict limits.
func (n *Node) acquireOwned(ctx context.Context, l *limits.Limit, req api.AcquireRequest) (api.AcquireResponse, error) {
	if n.cluster != nil {
		// Right after a ring change the previous owner may still hold this
		// key's leases (a restarted owner before they are handed back):
		// pull them first, as for buckets.
		if !n.cluster.pull(ctx, n.limits.Current(), []api.Check{{Limit: l.Name, Key: req.Key}}, "") {
			return n.acquireFallback(ctx, l, req)
		}
		if left, ok := n.cluster.takeover(l, req.Key); ok {
			if l.Strict {
				n.leases.m.denials.WithLabelValues(l.Name, denialConcurrency).Inc()
				return api.AcquireResponse{Permits: l.Permits, RetryAfter: left, Source: api.SourceOwner}, nil
			}
			shared := *l
			shared.Permits = max(1, l.Permits/int64(n.cluster.known()))
			return n.leases.acquire(ctx, &shared, req)
		}
	}
	return n.leases.acquire(ctx, l, req)
}

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

// serveLease is the owner's side of forwarded lease operations.
func (c *cluster) serveLease(ctx context.Context, f *limits.File, from string, r transport.Request) transport.Reply {
	n := c.node
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
	v := c.view()
	if m, ok := v.Owner(ring.HashKey(limit, key)); ok && m.Name != c.self && m.Name != from {
		return transport.Reply{NotOwner: true}
	}
	switch r.Op {
	case transport.OpAcquire:
		req := api.AcquireRequest{Limit: limit, Key: key, Holder: r.Holder, TTL: r.TTL, Wait: r.Wait}
		l, err := validateAcquire(f, req)
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
	s := c.node.leases
	s.mu.Lock()
	h, ev := s.table.Export(c.now(), pick, true)
	s.deliver(ev)
	s.mu.Unlock()
	out := make([]transport.HandoffEntry, 0, len(h.Leases))
	for _, l := range h.Leases {
		out = append(out, transport.HandoffEntry{
			Kind: transport.HandoffLease, Limit: l.Limit, Key: l.Key,
			Fields: []int64{int64(l.Fencing), int64(l.TTL), int64(l.Remaining), int64(h.NextFencing)},
			Data:   []byte(l.ID + "\n" + l.Holder),
		})
	}
	return out
}

// importLeases takes in handed-over leases with their remaining time and
// raises the fencing floor above the sender's.
func (c *cluster) importLeases(entries []transport.HandoffEntry) {
	var h lease.Handoff
	for _, e := range entries {
		if e.Kind != transport.HandoffLease || len(e.Fields) != 4 {
			continue
		}
		id, holder, _ := strings.Cut(string(e.Data), "\n")
		h.Leases = append(h.Leases, lease.Snapshot{
			ID: id, Limit: e.Limit, Key: e.Key, Holder: holder,
			Fencing: uint64(e.Fields[0]), TTL: time.Duration(e.Fields[1]), Remaining: time.Duration(e.Fields[2]),
		})
		h.NextFencing = max(h.NextFencing, uint64(e.Fields[3]))
	}
	if len(h.Leases) == 0 {
		return
	}
	s := c.node.leases
	s.mu.Lock()
	ev, err := s.table.Import(c.now(), h)
	s.deliver(ev)
	s.mu.Unlock()
	if err != nil {
		c.log.Warn("lease handoff rejected", "err", err)
	}
}

// reachable reports whether the peer answers within the forward deadline:
// the ring may still list as alive an owner this node cannot reach.
func (c *cluster) reachable(ctx context.Context, peer string) bool {
	_, err := c.pool.Do(ctx, peer, transport.Request{Op: transport.OpPull})
	return err == nil
}
