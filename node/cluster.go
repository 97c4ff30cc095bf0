package node

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/ring/gossip"
	"github.com/weir-rl/weir/transport"
)

// cluster routes checks over the ring and moves state between owners.
// It implements the engine's router; the node's peer handler (peer.go)
// serves what peers send.
//
// Where a key is decided is the pure placement core's answer
// (node/placement): cluster builds a placement.Snapshot whenever its view,
// failure log or join state changes, publishes it through an atomic
// pointer, and looks the key's moved mark up for it. Takes and leases both
// route through it.
//
// Ownership changes are handled without consensus, in three moves that
// keep a moved bucket's debt (docs/architecture.md):
//
//   - push: when its view changes, a node hands every bucket it no longer
//     owns to the new owner (transport Handoff) and only then forgets it;
//   - pull: a node that owns a key it holds no state for, within
//     HandoffWindow of a view change (or when the previous owner itself
//     forwarded the key), first pulls the state from the key's owner in the
//     view without itself; the sender extracts it and from then on passes
//     requests for that key on to the puller (a "moved" mark, kept for
//     HandoffWindow), so the key is decided in one place;
//   - proxy: a node asked about a key it does not own passes the request on
//     once to the owner in its own view; a request already passed on is
//     answered NotOwner, and its sender falls back to a local ceiling.
//
// Receivers merge conservatively (the fewer tokens wins), so a state
// arriving twice, by push and by pull, never mints tokens. Striped key
// locks keep a decision from interleaving with a handover of its key.
//
// cluster holds the node's owner store and lease shell, which it hands
// over and takes in, but not the engine or the node.
type cluster struct {
	self   string
	ring   *gossip.Membership
	pool   *transport.Pool
	store  *bucket.Store // the node's owner buckets, shared with the engine
	leases *leases       // the node's owner lease table
	limits func() *limits.File
	log    *slog.Logger
	now    func() time.Time
	window time.Duration // HandoffWindow
	// spawn runs f on a goroutine the node owns (ends by Shutdown).
	spawn func(f func())
	// rules is the fixed part of the placement rules.
	rules placement.Config
	// pub is the placement snapshot in force and what it was built from.
	pub   atomic.Pointer[published]
	locks keyLocks // see hold and handOver
	// leaving is set while this node hands everything off before leaving.
	leaving atomic.Pointer[ring.View]
	// movedN mirrors len(moved), so the decision path skips the lock when
	// nothing was handed over.
	movedN atomic.Int64
	m      *clusterMetrics
	// repl, replicas and rm are the replication stream's owner side, its
	// successor side and metrics; all nil with replication off.
	repl     *replicator
	replicas *replicas
	rm       *replMetrics

	mu       sync.Mutex                 // guards the fields below
	moved    map[movedKey]moved         // keys pulled away from this node, by (limit, key)
	pulling  map[movedKey]chan struct{} // in-flight pulls, so one key is pulled once
	fetched  map[movedKey]time.Time     // keys pulled since the view change at the value
	purgeAt  time.Time                  // when expired moved marks are next swept
	last     *ring.View                 // the ring view the failure log was last updated for
	failures []placement.Failure        // the failure log (immutable once published)
	changed  time.Time                  // when the ring view last changed
}

// published is a placement snapshot with the inputs it was built from, so
// a reader can tell with three loads whether it is current.
type published struct {
	snap    *placement.Snapshot
	view    *ring.View // the ring's view
	leaving *ring.View
	joined  bool
}

type movedKey struct{ limit, key string }

type moved struct {
	to    string // member name
	until time.Time
}

var _ router = (*cluster)(nil)

// placement returns the placement snapshot for the ring's current view,
// building it first when the view, the join state or the leave changed.
// It records, on a view change, when the view changed (for the pull
// window) and which members failed (for takeover delays and lease
// ceilings), so no decision runs on a view whose failures are not in the
// log yet. Cheap when nothing changed: a few atomic loads.
func (c *cluster) placement() *placement.Snapshot {
	v, l, joined := c.ring.View(), c.leaving.Load(), c.ring.Joined()
	if p := c.pub.Load(); p != nil && p.view == v && p.leaving == l && p.joined == joined {
		return p.snap
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pub.Load(); p != nil && p.view == v && p.leaving == l && p.joined == joined {
		return p.snap
	}
	if c.last != v {
		now := c.now()
		c.failures = placement.Observe(c.failures, c.last, v, now, c.rules.FailureMemory)
		c.changed = now
		c.last = v
	}
	route := v
	if l != nil {
		route = l
	}
	snap := placement.New(c.rules, placement.State{View: route, Known: v, Joined: joined, Failures: c.failures, Changed: c.changed})
	c.pub.Store(&published{snap: snap, view: v, leaving: l, joined: joined})
	return snap
}

// joined reports whether this node routes by its ring (placement's join
// rule), for readiness.
func (c *cluster) joined() bool { return c.placement().Joined() }

// addrOf returns a live member's peer address, or "" when it is unreachable.
func addrOf(v *ring.View, name string) string {
	m, ok := v.Member(name)
	if !ok || m.State != ring.Alive {
		return ""
	}
	return m.Meta.GRPCAddr
}

// place implements router.
func (c *cluster) place(limit, key string) placement.Placement {
	return c.placement().Take(c.now(), limit, key, c.mark(limit, key))
}

// placeLease places a lease operation (no takeover delay: the lease
// ceiling guards the table instead).
func (c *cluster) placeLease(limit, key string) placement.Placement {
	return c.placement().Lease(c.now(), limit, key, c.mark(limit, key))
}

// mark returns this node's moved mark for (limit, key), the zero Mark if
// it handed nothing over.
func (c *cluster) mark(limit, key string) placement.Mark {
	to, _ := c.movedTo(limit, key)
	return placement.Mark{To: to}
}

// movedTo reports where a key this node handed over is decided now.
func (c *cluster) movedTo(limit, key string) (string, bool) {
	if c.movedN.Load() == 0 {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	mv, ok := c.moved[movedKey{limit, key}]
	if !ok {
		return "", false
	}
	if c.now().After(mv.until) {
		c.unmark(movedKey{limit, key})
		return "", false
	}
	return mv.to, true
}

// unmark deletes a moved mark. Called with c.mu held.
func (c *cluster) unmark(k movedKey) {
	if _, ok := c.moved[k]; ok {
		delete(c.moved, k)
		c.movedN.Add(-1)
	}
}

// known implements router: the members a local ceiling divides by.
func (c *cluster) known() int { return c.placement().Known() }

// forward implements router.
func (c *cluster) forward(ctx context.Context, peer string, op forwardOp, checks []api.Check) ([]api.Result, bool, error) {
	req := transport.Request{Op: transport.OpTake, Checks: toTransport(checks), Epoch: c.ring.View().Epoch}
	if op == opRefund {
		req.Op = transport.OpRefund
	} else {
		req.RequestID = api.RequestID(ctx)
	}
	rep, err := c.pool.Do(ctx, peer, req)
	if err != nil {
		return nil, false, err
	}
	if rep.ErrCode != 0 {
		return nil, false, &api.Error{Code: api.Code(rep.ErrCode), Detail: rep.ErrDetail}
	}
	if rep.NotOwner {
		c.m.notOwner.Inc()
		return nil, false, errNotOwner
	}
	if op == opRefund {
		return nil, true, nil
	}
	if len(rep.Results) != len(checks) {
		return nil, false, errors.New("node: owner answered the wrong number of results")
	}
	out := make([]api.Result, len(checks))
	allowed := true
	for i, r := range rep.Results {
		out[i] = api.Result{
			Limit: checks[i].Limit, Allowed: r.Allowed, Remaining: r.Remaining, Capacity: r.Capacity,
			RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter, Window: r.Window, Source: api.SourceOwner,
		}
		if r.Run != "" {
			out[i].Evidence = api.Evidence{Run: r.Run, DecidedAt: time.Unix(0, r.DecidedAt), Bucket: r.Bucket}
		}
		allowed = allowed && r.Allowed
	}
	return out, allowed, nil
}

var errNotOwner = errors.New("node: the owner's ring disagrees")

func toTransport(checks []api.Check) []transport.Check {
	out := make([]transport.Check, len(checks))
	for i, c := range checks {
		out[i] = transport.Check{Limit: c.Limit, Key: c.Key, Cost: c.Cost, Inline: inlineToTransport(c.Inline)}
	}
	return out
}

func fromTransport(checks []transport.Check) []api.Check {
	out := make([]api.Check, len(checks))
	for i, c := range checks {
		out[i] = api.Check{Limit: c.Limit, Key: c.Key, Cost: c.Cost, Inline: inlineFromTransport(c.Inline)}
	}
	return out
}

// pull makes sure this node holds the state of every check's key before
// it decides them: a key it does not hold (has reports false) is pulled
// from from (when a previous owner handed the request over) or, within
// HandoffWindow of a view change, from the key's owner in the view without
// this node. A key pulled once since the last view change is not pulled
// again, so a lease key that holds no lease is not pulled on every acquire.
// It reports false when a state it needed could not be pulled: the caller
// must not decide from a fresh bucket then.
//
// With adopt (the checks were placed Replica), a key it holds no state for
// is first started from this node's replica of it.
func (c *cluster) pull(ctx context.Context, checks []api.Check, from string, has func(limit, key string) bool, adopt bool) bool {
	snap := c.placement()
	now := c.now()
	if adopt && c.replicas != nil {
		// Placed Replica: the key's owner failed and this node took it
		// over; it starts from the replica it kept rather than full.
		for _, ch := range checks {
			if !has(ch.Limit, ch.Key) {
				c.adopt(ch.Limit, ch.Key)
			}
		}
	}
	if from == "" && !snap.Recent(now) {
		return true
	}
	ok := true
	for _, ch := range checks {
		if has(ch.Limit, ch.Key) || c.wasFetched(ch.Limit, ch.Key) {
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
		if !c.pullOne(ctx, addr, ch) {
			ok = false
		}
	}
	return ok
}

// wasFetched reports whether (limit, key) was pulled since the last view
// change.
func (c *cluster) wasFetched(limit, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.fetched[movedKey{limit, key}]
	return ok && at.Equal(c.changed)
}

// pullOne pulls one key's state, once even when many requests miss it
// together. It reports whether the state is now known here.
func (c *cluster) pullOne(ctx context.Context, addr string, ch api.Check) bool {
	k := movedKey{ch.Limit, ch.Key}
	c.mu.Lock()
	if wait, ok := c.pulling[k]; ok {
		c.mu.Unlock()
		select {
		case <-wait: // the pull under way ended: did it succeed?
			return c.wasFetched(ch.Limit, ch.Key)
		case <-ctx.Done():
			return false
		}
	}
	done := make(chan struct{})
	c.pulling[k] = done
	c.mu.Unlock()
	ok := false
	defer func() {
		c.mu.Lock()
		delete(c.pulling, k)
		if ok {
			if len(c.fetched) > 4096 { // bounded: forget the oldest window's
				for fk, at := range c.fetched {
					if !at.Equal(c.changed) {
						delete(c.fetched, fk)
					}
				}
			}
			c.fetched[k] = c.changed
		}
		c.mu.Unlock()
		close(done)
	}()
	rep, err := c.pool.Do(ctx, addr, transport.Request{Op: transport.OpPull, Checks: []transport.Check{{Limit: ch.Limit, Key: ch.Key}}})
	if err != nil || rep.ErrCode != 0 {
		c.m.pulls.WithLabelValues("error").Inc()
		return false
	}
	c.m.pulls.WithLabelValues("ok").Inc()
	c.takeIn(rep.Entries)
	ok = true
	return true
}

// takeIn stores handed-over state: buckets merged conservatively, leases
// imported with their remaining time.
func (c *cluster) takeIn(entries []transport.HandoffEntry) {
	c.merge(c.limits(), entries)
	c.importLeases(entries)
}

// merge folds handed-over bucket entries into the store, conservatively.
func (c *cluster) merge(f *limits.File, entries []transport.HandoffEntry) {
	var bs []bucket.Entry
	for _, e := range entries {
		if b, ok := bucketOf(e); ok {
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 {
		return
	}
	// A key handed (back) to this node is decided here again.
	c.mu.Lock()
	for _, b := range bs {
		c.unmark(movedKey{b.Name, b.Key})
	}
	c.mu.Unlock()
	now := c.now()
	if c.repl != nil {
		for _, b := range bs {
			c.repl.touch(b.Name, b.Key, now)
		}
	}
	c.store.MergeAt(now, bs, bucketLimit(f))
	c.m.handoff.WithLabelValues("in").Add(float64(len(bs)))
}

// servePull hands over the named keys' buckets and leases and marks them
// moved to the puller, so this node stops deciding them.
func (c *cluster) servePull(from string, r transport.Request) transport.Reply {
	var rep transport.Reply
	now := c.now()
	for _, ch := range r.Checks {
		if e, ok := c.handOver(now, ch.Limit, ch.Key, from); ok {
			rep.Entries = append(rep.Entries, bucketEntry(e))
		}
		limit, key := ch.Limit, ch.Key
		rep.Entries = append(rep.Entries, c.takeLeases(func(l, k string) bool { return l == limit && k == key })...)
	}
	c.m.handoff.WithLabelValues("out").Add(float64(len(rep.Entries)))
	return rep
}

// markMoved records that (limit, key) is now decided by member to.
func (c *cluster) markMoved(limit, key, to string) {
	c.mu.Lock()
	now := c.now()
	k := movedKey{limit, key}
	if _, ok := c.moved[k]; !ok {
		c.movedN.Add(1)
	}
	c.moved[k] = moved{to: to, until: now.Add(c.window)}
	// Marks expire after HandoffWindow; sweep them now and then so keys
	// that are never asked about again do not pile up.
	if now.After(c.purgeAt) {
		for mk, mv := range c.moved {
			if now.After(mv.until) {
				c.unmark(mk)
			}
		}
		c.purgeAt = now.Add(c.window)
	}
	c.mu.Unlock()
}

func errReply(err error) transport.Reply {
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		return transport.Reply{ErrCode: uint8(apiErr.Code), ErrDetail: apiErr.Detail}
	}
	return transport.Reply{ErrCode: uint8(api.CodeUnavailable), ErrDetail: err.Error()}
}

// keyLocks are striped locks over (limit, key): a decision holds its keys'
// stripes for reading from its ownership check to its debit, and a handover
// holds the stripe for writing while it marks the key moved and extracts
// its bucket. So a take under way either lands in the extracted state or
// sees the mark and goes to the new owner; it never debits a fresh bucket
// left behind.
type keyLocks [64]sync.RWMutex

func stripe(limit, key string) int {
	return int(xxhash.Sum64String(limit+"\x00"+key) % 64)
}

// hold implements router.
func (c *cluster) hold(checks []api.Check) (func(), bool) {
	var idx [8]int
	stripes := idx[:0]
	for _, ch := range checks {
		stripes = append(stripes, stripe(ch.Limit, ch.Key))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, i := range stripes {
		c.locks[i].RLock()
	}
	release := func() {
		for _, i := range stripes {
			c.locks[i].RUnlock()
		}
	}
	for _, ch := range checks {
		if _, moved := c.movedTo(ch.Limit, ch.Key); moved {
			return release, false
		}
	}
	return release, true
}

// handOver marks (limit, key) moved to member to and removes its bucket,
// returning the bucket's state, with no decision on the key in between.
func (c *cluster) handOver(now time.Time, limit, key, to string) (bucket.Entry, bool) {
	l := &c.locks[stripe(limit, key)]
	l.Lock()
	defer l.Unlock()
	c.markMoved(limit, key, to)
	return c.store.ExtractAt(now, limit, key)
}
