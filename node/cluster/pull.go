package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/lease"
	"github.com/weir-rl/weir/node/engine"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// Prepare implements engine.Router: see pull.
func (c *Cluster) Prepare(ctx context.Context, checks []api.Check, adopt bool, held func(limit, key string) bool) error {
	return c.pull(ctx, checks, "", held, adopt)
}

// errPull is a pull that failed for another reason than its deadline.
var errPull = errors.New("cluster: the key's state could not be pulled")

// pull makes sure this node holds the state of every check's key before
// it decides them: a key it does not hold (held reports false) is pulled
// from member from (when a previous owner handed the request over) or,
// within HandoffWindow of a view change, from the key's owner in the view
// without this node. A key pulled once since the last view change is not
// pulled again, so a lease key that holds no lease is not pulled on every
// acquire. It returns an error when a state it needed could not be
// pulled, and the caller must not decide from a fresh bucket then: one
// wrapping engine.ErrOwnerLate when the member holding it (alive) did not
// answer within ctx's deadline, errPull otherwise.
//
// With adopt (the checks were placed Replica), a key it holds no state for
// is first started from this node's replica of it.
func (c *Cluster) pull(ctx context.Context, checks []api.Check, from string, held func(limit, key string) bool, adopt bool) error {
	snap := c.placement()
	now := c.now()
	if adopt {
		// Placed Replica: the key's owner failed and this node took it
		// over; it starts from the replica it kept rather than full.
		for _, ch := range checks {
			if !held(ch.Limit, ch.Key) {
				c.adopt(ch.Limit, ch.Key)
			}
		}
	}
	if from == "" && !snap.Recent(now) {
		return nil
	}
	var failed error
	for _, ch := range checks {
		if held(ch.Limit, ch.Key) || c.wasFetched(ch.Limit, ch.Key) {
			continue
		}
		var addr string
		if from != "" {
			addr = addrOf(snap.View(), from)
		} else if p, found := snap.PullFrom(now, ch.Limit, ch.Key); found {
			addr = p.Addr
		}
		if addr == "" {
			continue
		}
		if err := c.pullOne(ctx, addr, ch); err != nil && !errors.Is(failed, errPull) {
			failed = err // a key that could not be fetched at all outranks a late one
		}
	}
	return failed
}

// addrOf returns a live member's peer address, or "" when it is unreachable.
func addrOf(v *ring.View, name string) string {
	m, ok := v.Member(name)
	if !ok || m.State != ring.Alive {
		return ""
	}
	return m.Meta.GRPCAddr
}

// wasFetched reports whether (limit, key) was pulled since the last view
// change.
func (c *Cluster) wasFetched(limit, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.fetched[keyID{Limit: limit, Key: key}]
	return ok && at.Equal(c.changed)
}

// pullOne pulls one key's state from addr, once even when many requests
// miss it together (they share the pull's outcome). It returns nil when
// the state is now known here, and pull's errors otherwise.
//
// The pull outlives the request that started it: it runs within
// HandoffDeadline, not within that request's deadline. The holder extracts
// the state when it serves the pull, so a reply abandoned because its
// first asker gave up would leave the key's debt nowhere, and the next
// request would start the key from a fresh bucket. Each request waits
// only as long as its own deadline allows.
func (c *Cluster) pullOne(ctx context.Context, addr string, ch api.Check) error {
	res := c.pulls.DoChan(ch.Limit+"\x00"+ch.Key, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Forward.HandoffDeadline)
		defer cancel()
		return nil, c.fetch(fctx, addr, ch)
	})
	select {
	case r := <-res:
		return r.Err
	case <-ctx.Done():
		return fmt.Errorf("%w: pull from %s: %w", engine.ErrOwnerLate, addr, ctx.Err())
	}
}

// fetch pulls (limit, key)'s state from addr and takes it in.
func (c *Cluster) fetch(ctx context.Context, addr string, ch api.Check) error {
	rep, err := c.pool.Do(ctx, addr, transport.Request{Op: transport.OpPull, Checks: []api.Check{{Limit: ch.Limit, Key: ch.Key}}})
	if err != nil || rep.ErrCode != 0 {
		c.m.pulls.WithLabelValues("error").Inc()
		if errors.Is(err, transport.ErrDeadline) || errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w: pull from %s: %w", engine.ErrOwnerLate, addr, err)
		}
		return errPull
	}
	c.m.pulls.WithLabelValues("ok").Inc()
	c.takeIn(rep.State)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.fetched) > 4096 { // bounded: forget the older windows' keys
		for fk, at := range c.fetched {
			if !at.Equal(c.changed) {
				delete(c.fetched, fk)
			}
		}
	}
	c.fetched[keyID{Limit: ch.Limit, Key: ch.Key}] = c.changed
	return nil
}

// takeIn stores handed-over state: buckets merged conservatively, leases
// imported with their remaining time.
func (c *Cluster) takeIn(st transport.State) {
	if err := c.run.Holdings.ImportHoldings(c.now(), st.Holdings); err != nil {
		c.log.Warn("allotments handed over but not all recorded", "err", err)
	}
	c.merge(st.Buckets)
	c.importLeases(st.Leases)
}

// merge folds handed-over buckets into the owner store, conservatively. A
// key handed (back) to this node is decided here again.
func (c *Cluster) merge(bs []bucket.Entry) {
	if len(bs) == 0 {
		return
	}
	c.mu.Lock()
	for _, b := range bs {
		c.unmark(keyID{Limit: b.Name, Key: b.Key})
	}
	c.mu.Unlock()
	c.run.Holdings.MergeBuckets(c.now(), bs)
	c.m.handoff.WithLabelValues("in").Add(float64(len(bs)))
}

// importLeases takes in handed-over leases with their remaining time and
// raises the fencing floor above the sender's.
func (c *Cluster) importLeases(h lease.Handoff) {
	if err := c.run.Holdings.ImportLeases(c.now(), h); err != nil {
		c.log.Warn("lease handoff rejected", "err", err)
	}
}

// servePull hands over the named keys' buckets and leases and marks them
// moved to the puller, so this node stops deciding them.
func (c *Cluster) servePull(from string, r transport.Request) transport.Reply {
	var st transport.State
	now := c.now()
	for _, ch := range r.Checks {
		e, ok, hs := c.handOver(now, ch.Limit, ch.Key, from)
		if ok {
			st.Buckets = append(st.Buckets, e)
		}
		st.Holdings = append(st.Holdings, hs...)
		limit, key := ch.Limit, ch.Key
		h := c.run.Holdings.ExportLeases(now, func(l, k string) bool { return l == limit && k == key }, true)
		st.Leases.Leases = append(st.Leases.Leases, h.Leases...)
		st.Leases.NextFencing = max(st.Leases.NextFencing, h.NextFencing)
	}
	c.m.handoff.WithLabelValues("out").Add(float64(st.Len()))
	return transport.Reply{State: st}
}
