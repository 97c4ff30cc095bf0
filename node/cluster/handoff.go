package cluster

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// watch follows ring changes: it records when the view changed and pushes
// the buckets and leases this node no longer owns to their new owners. A
// push that failed goes again, after 100 ms and then twice as long each
// time (at most HandoffWindow apart), until it succeeds or the view
// changes. Within HandoffWindow of the change a new owner pulls a key it
// misses, so a push that lands then loses nothing. After the window the
// new owner has started such a key full; a push that lands then still
// brings the debt (the receiver keeps the fewer tokens), which caps what
// it admits from then on, so it goes on for as long as a bucket still to
// push holds debt (pushMoved with late).
func (c *Cluster) watch(ctx context.Context) {
	alive := map[string]bool{} // peer addresses alive in the last view
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var (
		pending *ring.View    // the view whose push failed, nil when none did
		window  time.Time     // when its new owners stop pulling
		wait    time.Duration // before the next retry
	)
	push := func(v *ring.View) {
		if c.pushMoved(ctx, v, !c.now().Before(window)) {
			pending = v
			retry.Reset(wait)
			wait = min(2*wait, max(c.cfg.HandoffWindow, pushRetry))
			return
		}
		pending = nil
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			if pending != nil && pending == c.ring.View() {
				push(pending)
			}
		case v, ok := <-c.ring.Changes():
			if !ok || v == nil {
				return
			}
			c.placement()
			c.observe(v)
			c.repl.resync(alone(v)) // successors may have changed
			c.replicas.sweep(c.now(), v)
			c.warm(ctx, v, alive)
			retry.Stop()
			pending = nil
			if v.Majority {
				window, wait = c.now().Add(c.cfg.HandoffWindow), pushRetry
				push(v)
			}
		}
	}
}

// pushRetry is the wait before a failed push first goes again.
const pushRetry = 100 * time.Millisecond

// alone reports whether v has no alive member but its own: no key has a
// successor (placement forwards only to alive members).
func alone(v *ring.View) bool {
	for _, m := range v.Members {
		if m.Name != v.Self && m.State == ring.Alive {
			return false
		}
	}
	return true
}

// observe sets the ring gauges from v.
func (c *Cluster) observe(v *ring.View) {
	c.m.epoch.Set(float64(v.Epoch))
	proto := ring.CommonVersion(v.Members)
	c.m.protocol.Set(float64(proto))
	c.pool.SetProtocol(proto)
	counts := map[string]int{}
	for _, m := range v.Members {
		counts[m.State.String()]++
	}
	for _, s := range []string{"alive", "suspect", "dead"} {
		c.m.members.WithLabelValues(s).Set(float64(counts[s]))
	}
}

// warm dials every live member that was not alive in the last view
// (Reachable's empty pull), so the first real forward to a new member does
// not pay for the connection and miss its deadline. A member back from a
// failure is first redialled at once (transport.Pool.Reconnect): its
// connection may be waiting out the backoff of the dials refused while it
// was down, failing every forward and handoff meanwhile. alive is updated
// to v's live members.
func (c *Cluster) warm(ctx context.Context, v *ring.View, alive map[string]bool) {
	was := maps.Clone(alive)
	clear(alive)
	for _, m := range v.Members {
		addr := m.Meta.GRPCAddr
		if m.Name == c.self || m.State != ring.Alive || addr == "" {
			continue
		}
		alive[addr] = true
		if was[addr] {
			continue
		}
		c.pool.Reconnect(addr)
		c.wg.Go(func() { c.Reachable(ctx, addr) })
	}
}

// pushMoved hands every bucket and lease whose owner in v is another live
// member to that member. A bucket leaves this node only once the new owner
// stored it, and leases a push failed to deliver go back into the table;
// until then a pull finds them here. Two pushes may overlap (the leave's
// and the watch's): a receiver keeps the fewer tokens of two copies, and
// only one of them extracts each bucket. A late push, after the new
// owners' pull window, leaves out the buckets refilled by now (a new owner
// that started one full is right) and logs a failure at debug level (the
// push within the window logged it as a warning). It reports whether a
// push failed.
func (c *Cluster) pushMoved(ctx context.Context, v *ring.View, late bool) (failed bool) {
	now := c.now()
	snap := placement.New(c.rules, placement.State{View: v, Joined: true})
	pick := func(limit, key string) bool { _, ok := snap.HandTo(limit, key); return ok }
	byOwner := map[placement.Placement]*transport.State{}
	to := func(limit, key string) *transport.State {
		p, _ := snap.HandTo(limit, key)
		st := byOwner[p]
		if st == nil {
			st = &transport.State{}
			byOwner[p] = st
		}
		return st
	}
	for _, e := range c.run.Holdings.ExportBuckets(now, pick, false) {
		if late && refilled(e.Snapshot) {
			continue
		}
		st := to(e.Name, e.Key)
		st.Buckets = append(st.Buckets, e)
	}
	// Holdings go as a copy first, with the snapshots of their buckets;
	// pushFinal moves them with the buckets, under the key's hold.
	for _, hd := range c.run.Holdings.ExportHoldings(now, pick, false) {
		st := to(hd.Key.Limit, hd.Key.Key)
		st.Holdings = append(st.Holdings, hd)
	}
	h := c.run.Holdings.ExportLeases(now, pick, true)
	for _, l := range h.Leases {
		st := to(l.Limit, l.Key)
		st.Leases.Leases = append(st.Leases.Leases, l)
		st.Leases.NextFencing = h.NextFencing
	}
	level := slog.LevelWarn
	if late {
		level = slog.LevelDebug
	}
	for p, st := range byOwner {
		name, addr := p.Peer, p.Addr
		if err := c.pool.Handoff(ctx, addr, *st); err != nil {
			// The leases left the table when they were exported: put them
			// back, so the new owner's pull finds them here. Dropped, a
			// rejoining owner whose pull found nothing would grant the
			// key's permits a second time.
			c.importLeases(st.Leases)
			c.log.Log(ctx, level, "handoff failed; the new owner pulls on first miss, and it is sent again", "to", name, "entries", st.Len(), "err", err)
			failed = true
			continue
		}
		c.m.handoff.WithLabelValues("out").Add(float64(st.Len()))
		c.log.Info("handed off", "to", name, "entries", st.Len())
		c.pushFinal(ctx, name, addr, *st)
	}
	return failed
}

// pushFinal sends the final state of the buckets (and the allotments
// granted of them) just handed to member name, extracting them: a take
// already under way when the snapshot was made may have spent since. The
// receiver keeps the fewer tokens and the larger holdings, so the second
// copy only ever adds that debit.
func (c *Cluster) pushFinal(ctx context.Context, name, addr string, sent transport.State) {
	var final transport.State
	keys := map[keyID]bool{}
	for _, e := range sent.Buckets {
		keys[keyID{Limit: e.Name, Key: e.Key}] = true
	}
	for _, h := range sent.Holdings {
		keys[keyID{Limit: h.Key.Limit, Key: h.Key.Key}] = true
	}
	for k := range keys {
		x, ok, hs := c.handOver(c.now(), k.Limit, k.Key, name)
		if ok {
			final.Buckets = append(final.Buckets, x)
		}
		final.Holdings = append(final.Holdings, hs...)
	}
	if final.Len() == 0 {
		return
	}
	if err := c.pool.Handoff(ctx, addr, final); err != nil {
		c.log.Warn("final handoff failed", "to", name, "buckets", len(final.Buckets), "err", err)
	}
}

// leave hands everything to the owners in the view without this node,
// then leaves the gossip. Requests that arrive meanwhile are routed by that
// view, so the successors decide them (pulling from here if need be).
func (c *Cluster) leave(ctx context.Context, timeout time.Duration) error {
	// Tell the peers first: their views mark this node Leaving, a view
	// change, so they give the forwards of callers without a deadline the
	// settle bound (see settling) while this node hands its keys over and
	// passes their requests on. Announced only when there is someone to
	// hand to, and given one gossip round and one view rebuild to reach
	// them (bounded by a quarter of the timeout) before the push begins.
	if c.ring.View().Live > 1 {
		start := time.Now()
		_ = c.ring.AnnounceLeave(timeout / 4)
		spread := c.cfg.Ring.RebuildDebounce + 2*c.cfg.Ring.Timing.GossipInterval
		wait := time.NewTimer(max(min(spread, timeout/4)-time.Since(start), 0))
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
		}
	}
	without := c.ring.View().Without(c.self)
	c.leaving.Store(without)
	push := func() {
		if without.Live == 0 {
			return
		}
		// Bounded by the leave timeout: a peer that cannot be reached
		// would otherwise hold each handoff for HandoffDeadline.
		hctx, cancel := context.WithTimeout(ctx, timeout)
		c.pushMoved(hctx, without, false)
		cancel()
	}
	push()
	err := c.ring.Leave(timeout)
	// Peers that had not yet seen this node go kept sending it requests,
	// some of which it had to decide here (a proxied request is never
	// passed on twice), so buckets can exist again. Hand those over too,
	// now, while the peer pool is open: the view change the leave causes
	// makes watch push them as well, but that push races the pool's close,
	// and a hot bucket pushed by neither would start full at its new owner.
	push()
	return err
}
