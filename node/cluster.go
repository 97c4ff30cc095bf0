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
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/transport"
)

// cluster routes checks over the ring and serves peers. It implements the
// engine's router and transport.Handler.
//
// Ownership changes are handled without consensus, in three moves that
// keep a moved bucket's debt (DESIGN §6):
//
//   - push: when its view changes, a node hands every bucket it no longer
//     owns to the new owner (transport Handoff) and only then forgets it;
//   - pull: a node that owns a key it holds no bucket for, within
//     HandoffWindow of a view change (or when the previous owner itself
//     forwarded the key), first pulls the bucket from the key's owner in the
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
// Who may decide from the real bucket (route and mayDecide): the owner in
// a majority view only; not, for TakeoverDelay, a key that changed owner
// after a member failed; and a node started with --join not before its
// view holds another member. Everything else is a local ceiling. Each rule
// closes an over-admission that the fault harness in jepsen/ measured.
type cluster struct {
	self   string
	ring   *ring.Ring
	pool   *transport.Pool
	eng    *engine
	node   *Node
	log    *slog.Logger
	now    func() time.Time
	window time.Duration // HandoffWindow
	// takeoverDelay: keys of a failed member are served from local
	// ceilings this long before the new owner decides them.
	takeoverDelay time.Duration
	// timing is the ring's failure detection, whose DetectionSpread sets
	// a floor under takeoverDelay.
	timing ring.Timing
	// requireJoin: started with --join, so decide only from local ceilings
	// until a seed answered (DESIGN §6).
	requireJoin bool
	seeds       int // number of --join addresses
	// failures are recent member failures in detection order (an
	// immutable slice, replaced whole), read on the decision path without
	// a lock.
	failures atomic.Pointer[[]failure]
	locks    keyLocks // see hold and handOver
	// leaving is set while this node hands everything off before leaving.
	leaving atomic.Pointer[ring.View]
	// movedN mirrors len(moved), so the decision path skips the lock when
	// nothing was handed over.
	movedN atomic.Int64
	// synced is the ring view failures were last computed for; a reader
	// that finds a newer view syncs first, so no decision runs on a view
	// whose failures are not recorded yet.
	synced atomic.Pointer[ring.View]
	// changed is when this node's view last changed (Unix ns), read on
	// every owner decision to tell whether a pull may be needed.
	changed atomic.Int64
	m       *clusterMetrics

	mu      sync.Mutex                 // guards the fields below
	moved   map[movedKey]moved         // keys pulled away from this node, by (limit, key)
	pulling map[movedKey]chan struct{} // in-flight pulls, so one key is pulled once
	purgeAt time.Time                  // when expired moved marks are next swept
	last    *ring.View                 // the last view synced, to spot failures
}

type movedKey struct{ limit, key string }

type moved struct {
	to    string // member name
	until time.Time
}

var (
	_ router            = (*cluster)(nil)
	_ transport.Handler = (*cluster)(nil)
)

// view returns the view requests are routed by: the view without this node
// while it hands off before leaving.
func (c *cluster) view() *ring.View {
	if l := c.leaving.Load(); l != nil {
		return l
	}
	return c.ring.View()
}

// addr returns a live member's peer address, or "" when it is unreachable.
func addrOf(v *ring.View, name string) string {
	m, ok := v.Member(name)
	if !ok || m.State != ring.Alive {
		return ""
	}
	return m.Meta.GRPCAddr
}

// joined reports whether this node may route by v. A node started with
// --join may not until a seed answered and its view holds someone besides
// itself: between the two its view is itself alone, in which it would own
// every key (jepsen's kill-and-restart scenario caught exactly that).
func (c *cluster) joined(v *ring.View) bool {
	return !c.requireJoin || (c.ring.Joined() && len(v.Members) > 1)
}

// owner implements router.
func (c *cluster) owner(limit, key string) (string, bool, bool) {
	return c.route(limit, key, true)
}

// leaseOwner routes a lease operation like owner, but without the takeover
// delay: the lease table has its own guard after a failure (a local
// ceiling of permits for one max_lease_ttl, see takeover), and the delay
// would only add each survivor's fallback share on top of it.
func (c *cluster) leaseOwner(limit, key string) (string, bool, bool) {
	return c.route(limit, key, false)
}

func (c *cluster) route(limit, key string, delay bool) (string, bool, bool) {
	v := c.view()
	if !c.joined(v) {
		return "", false, false
	}
	if to, ok := c.movedTo(limit, key); ok {
		if to == c.self {
			return "", true, true
		}
		addr := addrOf(v, to)
		return addr, false, addr != ""
	}
	hk := ring.HashKey(limit, key)
	m, ok := v.Owner(hk)
	if !ok {
		return "", false, false
	}
	if m.Name != c.self {
		if m.State != ring.Alive { // suspect or dead: unreachable (DESIGN §6)
			return "", false, false
		}
		return m.Meta.GRPCAddr, false, true
	}
	if !v.Majority || (delay && !c.mayDecide(v, hk)) {
		return "", false, false
	}
	return "", true, true
}

// mayDecide reports whether this node, the owner of hk in v, may decide it
// from the real bucket. It may not on a minority side: the majority takes
// the key over, so the minority serves even its own keys from local
// ceilings (DESIGN §6: B + r·T on the majority side plus one share per
// minority node). Nor may it, for TakeoverDelay after a member failed,
// decide a key it did not own before that failure (the failed member's
// keys, and keys that bounded-load hashing moved between survivors): an
// isolated node sees its peers fail one at a time and would otherwise
// believe itself a majority in between. The delay runs from the latest of
// a run of failures (quietSince), and is at least the ring's
// DetectionSpread for the known members: a 5-node split showed a minority
// node declaring its peers dead 1.4 s apart, and taking over a key in
// between with the 1.2 s delay alone.
func (c *cluster) mayDecide(v *ring.View, hk string) bool {
	if !v.Majority {
		return false
	}
	c.sync()
	fs := c.failures.Load()
	if fs == nil {
		return true
	}
	now := c.now()
	delay := max(c.takeoverDelay, c.timing.DetectionSpread(len(v.Members)))
	from := quietSince(*fs, now, delay)
	for _, f := range *fs {
		if f.at.Before(from) {
			continue
		}
		if m, ok := f.prev.Owner(hk); ok && m.Name != c.self {
			return false
		}
	}
	return true
}

// quietSince returns the start of the run of failures still holding
// takeovers back at now: failures detected less than delay apart form one
// run, and a run holds back every key whose owner it changed until delay
// after its latest failure. A node cut off from a majority detects its
// peers' failures one at a time, and the gaps add up: in jepsen's 5-node
// split the minority node saw three failures 0.4 s and 1.2 s apart and,
// timing each from its own detection, took over the first failed owner's
// key before it noticed it was a minority. Failures at or after the
// returned time count; none count when the latest is delay old. fs must
// be in detection order.
func quietSince(fs []failure, now time.Time, delay time.Duration) time.Time {
	// fs is in detection order (noteFailures appends), so the run is a
	// suffix: walk it back from the latest without sorting or allocating
	// on the decision path.
	if len(fs) == 0 || now.Sub(fs[len(fs)-1].at) >= delay {
		return now.Add(time.Nanosecond)
	}
	from := fs[len(fs)-1].at
	for k := len(fs) - 2; k >= 0 && from.Sub(fs[k].at) < delay; k-- {
		from = fs[k].at
	}
	return from
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

// known implements router. Before a node started with --join has reached
// a seed it knows only itself; it then assumes at least the seeds and
// itself, so a restarted node does not grant itself a whole budget.
func (c *cluster) known() int {
	v := c.ring.View()
	n := len(v.Members)
	if !c.joined(v) {
		n = max(n, c.seeds+1)
	}
	return max(n, 1)
}

// forward implements router.
func (c *cluster) forward(ctx context.Context, peer string, op forwardOp, checks []api.Check) ([]api.Result, bool, error) {
	req := transport.Request{Op: transport.OpTake, Checks: toTransport(checks), Epoch: c.ring.View().Epoch}
	if op == opRefund {
		req.Op = transport.OpRefund
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

// pull makes sure this node holds the state of every check's bucket before
// it decides them: a bucket it does not hold is pulled from from (when a
// previous owner handed the request over) or, within HandoffWindow of a view
// change, from the key's owner in the view without this node.
// It reports false when a bucket it needed could not be pulled: the caller
// must not decide from a fresh bucket then.
func (c *cluster) pull(ctx context.Context, f *limits.File, checks []api.Check, from string) bool {
	v := c.sync()
	recent := c.now().UnixNano()-c.changed.Load() < int64(c.window)
	if !recent && from == "" {
		return true
	}
	ok := true
	var without *ring.View
	for _, ch := range checks {
		if c.eng.store.Has(ch.Limit, ch.Key) {
			continue
		}
		src := from
		if src == "" {
			if without == nil {
				without = v.Without(c.self)
			}
			m, ok := without.Owner(ring.HashKey(ch.Limit, ch.Key))
			if !ok || m.Name == c.self {
				continue
			}
			src = m.Name
		}
		addr := addrOf(v, src)
		if addr == "" {
			continue
		}
		if !c.pullOne(ctx, f, addr, ch) {
			ok = false
		}
	}
	return ok
}

// pullOne pulls one bucket, once even when many requests miss it together.
// It reports whether the bucket's state is now known here.
func (c *cluster) pullOne(ctx context.Context, f *limits.File, addr string, ch api.Check) bool {
	k := movedKey{ch.Limit, ch.Key}
	c.mu.Lock()
	if wait, ok := c.pulling[k]; ok {
		c.mu.Unlock()
		select {
		case <-wait:
			return true
		case <-ctx.Done():
			return false
		}
	}
	done := make(chan struct{})
	c.pulling[k] = done
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pulling, k)
		c.mu.Unlock()
		close(done)
	}()
	rep, err := c.pool.Do(ctx, addr, transport.Request{Op: transport.OpPull, Checks: []transport.Check{{Limit: ch.Limit, Key: ch.Key}}})
	if err != nil || rep.ErrCode != 0 {
		c.m.pulls.WithLabelValues("error").Inc()
		return false
	}
	c.m.pulls.WithLabelValues("ok").Inc()
	c.merge(f, rep.Entries)
	c.importLeases(rep.Entries)
	return true
}

// merge folds handed-over bucket entries into the store, conservatively.
func (c *cluster) merge(f *limits.File, entries []transport.HandoffEntry) {
	var bs []bucket.Entry
	for _, e := range entries {
		if e.Kind != transport.HandoffBucket {
			continue
		}
		if s, ok := decodeSnapshot(e.Fields); ok {
			bs = append(bs, bucket.Entry{Name: e.Limit, Key: e.Key, Snapshot: s})
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
	c.eng.store.MergeAt(c.now(), bs, func(name string) (bucket.Limit, bool) {
		l, ok := f.Lookup(name)
		if !ok || l.Kind != limits.KindRate {
			return bucket.Limit{}, false
		}
		return l.Bucket, true
	})
	c.m.handoff.WithLabelValues("in").Add(float64(len(bs)))
}

// Serve implements transport.Handler: the owner's side of forwards.
func (c *cluster) Serve(ctx context.Context, from string, reqs []transport.Request) []transport.Reply {
	out := make([]transport.Reply, len(reqs))
	f := c.eng.limits()
	for i, r := range reqs {
		out[i] = c.serveOne(ctx, f, from, r)
		out[i].Epoch = c.ring.View().Epoch
		out[i].RulesVersion = f.Version
	}
	return out
}

func (c *cluster) serveOne(ctx context.Context, f *limits.File, from string, r transport.Request) transport.Reply {
	switch r.Op {
	case transport.OpPull:
		return c.servePull(from, r)
	case transport.OpRefund:
		c.eng.store.RefundAt(c.now(), c.eng.refundChecks(f, fromTransport(r.Checks)))
		return transport.Reply{}
	case transport.OpTake:
		return c.serveTake(ctx, f, from, r)
	default:
		return c.serveLease(ctx, f, from, r)
	}
}

// serveTake decides a forwarded take if this node owns every key, passes
// it on once if another member does, and says NotOwner otherwise.
func (c *cluster) serveTake(ctx context.Context, f *limits.File, from string, r transport.Request) transport.Reply {
	checks := fromTransport(r.Checks)
	v := c.view()
	pullFrom := ""
	target := ""
	for _, ch := range checks {
		name := c.self
		hk := ring.HashKey(ch.Limit, ch.Key)
		if to, ok := c.movedTo(ch.Limit, ch.Key); ok {
			name = to
		} else if m, ok := v.Owner(hk); ok {
			name = m.Name
		}
		if name == c.self && !c.mayDecide(v, hk) {
			return transport.Reply{NotOwner: true}
		}
		if name == from && from != c.self {
			// The sender owns the key in our view yet sends it here: its
			// view has moved the key to us. Take over, pulling its state.
			name, pullFrom = c.self, from
		}
		if target == "" {
			target = name
		}
		if name != target {
			return transport.Reply{NotOwner: true}
		}
	}
	if target != c.self {
		addr := addrOf(v, target)
		if r.Proxied || addr == "" {
			return transport.Reply{NotOwner: true}
		}
		r.Proxied = true
		rep, err := c.pool.Do(ctx, addr, r)
		if err != nil {
			return transport.Reply{NotOwner: true}
		}
		c.m.proxied.Inc()
		return rep
	}
	if !c.pull(ctx, f, checks, pullFrom) {
		return transport.Reply{NotOwner: true}
	}
	res, _, err := c.eng.ownerTake(f, checks)
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

// servePull hands over the named buckets and marks them moved to the
// puller, so this node stops deciding them.
func (c *cluster) servePull(from string, r transport.Request) transport.Reply {
	var rep transport.Reply
	now := c.now()
	for _, ch := range r.Checks {
		if e, ok := c.handOver(now, ch.Limit, ch.Key, from); ok {
			rep.Entries = append(rep.Entries, transport.HandoffEntry{
				Kind:  transport.HandoffBucket,
				Limit: e.Name, Key: e.Key, Fields: encodeSnapshot(e.Snapshot),
			})
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

// Handoff implements transport.Handler: state pushed by a previous owner.
func (c *cluster) Handoff(_ context.Context, _ string, entries []transport.HandoffEntry) error {
	f := c.eng.limits()
	c.merge(f, entries)
	c.importLeases(entries)
	return nil
}

// encodeSnapshot and decodeSnapshot carry a bucket.Snapshot as int64s.
func encodeSnapshot(s bucket.Snapshot) []int64 {
	full := int64(0)
	if s.Full {
		full = 1
	}
	return []int64{int64(s.Algorithm), full, s.Count, s.Frac, s.Prev, int64(s.Ahead), int64(s.Since), int64(s.Left), int64(s.UntilFull)}
}

func decodeSnapshot(f []int64) (bucket.Snapshot, bool) {
	if len(f) != 9 || f[0] < 0 || f[0] > int64(bucket.FixedWindow) {
		return bucket.Snapshot{}, false
	}
	return bucket.Snapshot{
		Algorithm: bucket.Algorithm(f[0]), Full: f[1] == 1, Count: f[2], Frac: f[3], Prev: f[4],
		Ahead: time.Duration(f[5]), Since: time.Duration(f[6]), Left: time.Duration(f[7]), UntilFull: time.Duration(f[8]),
	}, true
}

// sync records what changed since the last view this node acted on: the
// time of the change (for the pull window) and members that failed (for
// takeover delays and lease takeover windows). It is cheap when nothing
// changed: one atomic load and a pointer compare.
func (c *cluster) sync() *ring.View {
	v := c.ring.View()
	if c.synced.Load() == v {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.synced.Load() == v {
		return v
	}
	c.changed.Store(c.now().UnixNano())
	c.noteFailures(c.last, v)
	c.last = v
	c.synced.Store(v)
	return v
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
	return c.eng.store.ExtractAt(now, limit, key)
}
