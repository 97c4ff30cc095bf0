package cluster

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/weir-rl/weir/allot"
	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/internal/tracing"
	"github.com/weir-rl/weir/node/engine"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/ring/gossip"
	"github.com/weir-rl/weir/transport"
)

// Config is what a cluster member needs beyond the engine's bounds. node
// fills it from node.Config.
type Config struct {
	// Self is this member's name.
	Self string
	// Ring configures membership; New sets its Name to Self and its
	// GossipKey to GossipKey.
	Ring gossip.Config
	// GossipKey encrypts gossip (derived from the cluster secret); nil:
	// plaintext.
	GossipKey []byte
	// Forward configures forwarding to owners; New sets its Self and
	// Credentials.
	Forward transport.Config
	// Credentials authenticate the peer channel (mutual TLS); nil:
	// plaintext.
	Credentials *transport.Credentials
	// PeerAddr is the peer service's listen address.
	PeerAddr string
	// PeerAdvertise is the peer address other members dial; "" derives it
	// from the gossip advertise address or the bound address.
	PeerAdvertise string
	// HandoffWindow is how long after a view change a new owner pulls a
	// key it does not hold from the previous owner, and how long a node
	// that handed a key over passes its requests on.
	HandoffWindow time.Duration
	// TakeoverDelay is how long the keys of a failed member are served
	// from local ceilings before their new owner decides them (floored by
	// the ring's DetectionSpread, see placement.Config).
	TakeoverDelay time.Duration
	// LeaveTimeout bounds the graceful leave on Stop.
	LeaveTimeout time.Duration
	// Replication streams each owned key's changes to its successor.
	Replication ReplicationConfig
}

// Deps are what a cluster member is handed rather than finding itself.
type Deps struct {
	// Logger receives logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the cluster's metrics.
	Registry prometheus.Registerer
	// Clock is the decision clock.
	Clock func() time.Time
	// Limits returns the limits in force: replicas are merged under them.
	Limits func() *limits.File
	// ListenPeer opens the peer service's listener; nil is net.Listen.
	ListenPeer func(network, addr string) (net.Listener, error)
	// Meta is this member's gossiped metadata before Start adds its
	// addresses: the limits version and the start incarnation.
	Meta ring.Meta
	// Tracer records forwards and owner steps (package internal/tracing);
	// nil is tracing off (the zero Tracer).
	Tracer *tracing.Tracer
}

// Cluster is one member's part of the cluster: it routes keys over the
// ring for the engine (engine.Router), forwards steps to their owners
// (engine.Peers), records the changes the replication stream sends
// (engine.Changes), serves what peers forward, and moves state between
// owners when the ring changes. Its methods are safe for concurrent use.
//
// Where a key is decided is the pure placement core's answer
// (node/placement): the cluster builds a placement.Snapshot whenever its
// view, failure log or join state changes, publishes it through an atomic
// pointer, and looks the key's moved mark up for it.
//
// Ownership changes are handled without consensus, in three moves that
// keep a moved bucket's debt (docs/architecture.md §6.5):
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
type Cluster struct {
	cfg    Config
	self   string
	ring   *gossip.Membership
	pool   *transport.Pool
	limits func() *limits.File
	log    *slog.Logger
	now    func() time.Time
	listen func(network, addr string) (net.Listener, error)
	// rules is the fixed part of the placement rules.
	rules placement.Config
	// pub is the placement snapshot in force and what it was built from.
	pub   atomic.Pointer[published]
	locks keyLocks // see Hold and handOver
	// leaving is set while this node hands everything off before leaving.
	leaving atomic.Pointer[ring.View]
	// movedN mirrors len(moved), so the decision path skips the lock when
	// nothing was handed over.
	movedN atomic.Int64
	m      *metrics
	tracer *tracing.Tracer // the zero Tracer when off
	// repl and replicas are the replication stream's owner side and its
	// successor side (null objects with replication off).
	repl     replication
	replicas replicaStore
	pulls    singleflight.Group // one pull per key at a time
	// run is what Start was handed: the engine it serves forwards with
	// and whose owner state it hands over. Start sets it before the peer
	// service and the goroutines that read it start; it never changes
	// after, and nothing reads it before (no view change, pull or forward
	// reaches this node until it gossips).
	run Serve
	// Goroutines started by Start, ended by Stop.
	cancel context.CancelFunc
	wg     sync.WaitGroup
	peerLn net.Listener
	srv    *transport.Server

	mu       sync.Mutex          // guards the fields below
	moved    map[keyID]moved     // keys pulled away from this node
	fetched  map[keyID]time.Time // keys pulled since the view change at the value
	purgeAt  time.Time           // when expired moved marks are next swept
	last     *ring.View          // the ring view the failure log was last updated for
	failures []placement.Failure // the failure log (immutable once published)
	changed  time.Time           // when the ring view last changed
}

// keyID identifies a bucket, or the lease table part of one key: (limit,
// key).
type keyID = transport.Key

// published is a placement snapshot with the inputs it was built from, so
// a reader can tell with three loads whether it is current.
type published struct {
	snap    *placement.Snapshot
	view    *ring.View // the ring's view
	leaving *ring.View
	joined  bool
}

// moved is where a key this node handed over is decided now, until when
// the mark holds, and what the handover extracted.
type moved struct {
	to    string // member name
	until time.Time
	// gave is the state extracted when the key was handed to member to:
	// handed to that member again should it ask again while the mark
	// holds (a pull whose reply was lost), rather than nothing, from which
	// it would start the key from a fresh bucket.
	gave handed
}

// handed is one key's state a handover extracted: its bucket (when ok)
// and the allotments granted of it.
type handed struct {
	bucket   bucket.Entry
	ok       bool
	holdings []allot.Entry
}

// empty reports whether the handover extracted nothing.
func (h handed) empty() bool { return !h.ok && len(h.holdings) == 0 }

var (
	_ engine.Router  = (*Cluster)(nil)
	_ engine.Peers   = (*Cluster)(nil)
	_ engine.Changes = (*Cluster)(nil)
)

// New builds a cluster member: its ring (not yet gossiping), its peer
// pool and its replication stream. It starts no goroutine and opens no
// socket; Start does.
func New(cfg Config, deps Deps) (*Cluster, error) {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rc := cfg.Ring
	rc.Name, rc.GossipKey = cfg.Self, cfg.GossipKey
	if rc.Logger == nil {
		rc.Logger = log
	}
	meta := deps.Meta
	meta.Protocol = ring.Versions{Min: transport.MinVersion, Max: transport.MaxVersion}
	r, err := gossip.New(rc, meta)
	if err != nil {
		return nil, err
	}
	m := newMetrics(deps.Registry)
	fwd := cfg.Forward
	fwd.Self, fwd.Credentials, fwd.Observer = cfg.Self, cfg.Credentials, observer{m}
	if err := fwd.Validate(); err != nil {
		return nil, err
	}
	listen := deps.ListenPeer
	if listen == nil {
		listen = net.Listen
	}
	tracer := deps.Tracer
	if tracer == nil {
		tracer = &tracing.Tracer{}
	}
	c := &Cluster{
		cfg: cfg, self: cfg.Self, ring: r, pool: transport.NewPool(fwd), limits: deps.Limits,
		log: log, now: deps.Clock, listen: listen, m: m, tracer: tracer,
		rules: placement.Config{
			Self: cfg.Self, TakeoverDelay: cfg.TakeoverDelay, Timing: rc.Timing, Seeds: len(rc.Join),
			HandoffWindow: cfg.HandoffWindow, FailureMemory: limits.MaxLeaseTTLLimit,
		},
		moved: map[keyID]moved{}, fetched: map[keyID]time.Time{},
		repl: noReplication{}, replicas: noReplicas{},
	}
	c.locks.initUnlocks()
	if cfg.Replication.Enabled {
		rs := newReplicas(cfg.Replication)
		rs.m = newReplMetrics(deps.Registry, rs.len)
		c.repl, c.replicas = newChangeLog(cfg.Replication, rs.m), rs
	}
	return c, nil
}

// Bucket implements engine.Changes: the replication stream records it.
func (c *Cluster) Bucket(limit, key string, now time.Time, after bucket.State, carried bool) {
	c.repl.Bucket(limit, key, now, after, carried)
}

// Lease implements engine.Changes: the replication stream records it.
func (c *Cluster) Lease(limit, key string, now time.Time) { c.repl.Lease(limit, key, now) }

// Sync implements engine.Changes: the replication stream sends the key's
// state to its successor now.
func (c *Cluster) Sync(ctx context.Context, limit, key string) error {
	return c.repl.sync(ctx, c, limit, key)
}

// placement returns the placement snapshot for the ring's current view,
// building it first when the view, the join state or the leave changed.
// It records, on a view change, when the view changed (for the pull
// window) and which members failed (for takeover delays and lease
// ceilings), so no decision runs on a view whose failures are not in the
// log yet. Cheap when nothing changed: a few atomic loads.
func (c *Cluster) placement() *placement.Snapshot {
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

// Place implements engine.Router.
func (c *Cluster) Place(limit, key string) placement.Placement {
	return c.placement().Take(c.now(), limit, key, c.mark(limit, key))
}

// PlaceLease implements engine.Router: a lease operation is placed
// without the takeover delay (the lease ceiling guards the table instead).
func (c *Cluster) PlaceLease(limit, key string) placement.Placement {
	return c.placement().Lease(c.now(), limit, key, c.mark(limit, key))
}

// Known implements engine.Router: the members a local ceiling divides by.
func (c *Cluster) Known() int { return c.placement().Known() }

// LeaseCeiling implements engine.Router.
func (c *Cluster) LeaseCeiling(limit, key string, maxTTL time.Duration) (time.Duration, int, bool) {
	snap := c.placement()
	left, ok := snap.LeaseCeiling(c.now(), limit, key, maxTTL, c.replicaCurrent(snap))
	return left, snap.Known(), ok
}

// mark returns this node's moved mark for (limit, key), the zero Mark if
// it handed nothing over.
func (c *Cluster) mark(limit, key string) placement.Mark {
	to, _ := c.movedTo(limit, key)
	return placement.Mark{To: to}
}

// movedTo reports where a key this node handed over is decided now.
func (c *Cluster) movedTo(limit, key string) (string, bool) {
	if c.movedN.Load() == 0 {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := keyID{Limit: limit, Key: key}
	mv, ok := c.moved[k]
	if !ok {
		return "", false
	}
	if c.now().After(mv.until) {
		c.unmark(k)
		return "", false
	}
	return mv.to, true
}

// unmark deletes a moved mark. Called with c.mu held.
func (c *Cluster) unmark(k keyID) {
	if _, ok := c.moved[k]; ok {
		delete(c.moved, k)
		c.movedN.Add(-1)
	}
}

// markMoved records that (limit, key) is now decided by member to, which
// was handed gave, and returns what to hand it: gave, or, when gave is
// empty and the key was already handed to that same member under a mark
// that still holds, what that earlier handover extracted. A member asks
// again only when it holds no state for the key: the earlier reply was
// lost (a pull whose caller gave up, a final push that failed), and the
// state it carried exists nowhere else. Handing it twice is safe: the
// receiver merges conservatively.
func (c *Cluster) markMoved(limit, key, to string, gave handed) handed {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	k := keyID{Limit: limit, Key: key}
	prev, ok := c.moved[k]
	if !ok {
		c.movedN.Add(1)
	}
	if gave.empty() && ok && prev.to == to && !now.After(prev.until) {
		gave = prev.gave
	}
	c.moved[k] = moved{to: to, until: now.Add(c.cfg.HandoffWindow), gave: gave}
	// Marks expire after HandoffWindow; sweep them now and then so keys
	// that are never asked about again do not pile up.
	if now.After(c.purgeAt) {
		for mk, mv := range c.moved {
			if now.After(mv.until) {
				c.unmark(mk)
			}
		}
		c.purgeAt = now.Add(c.cfg.HandoffWindow)
	}
	return gave
}

// Epoch is the epoch of the view requests are routed by.
func (c *Cluster) Epoch() uint64 { return c.ring.View().Epoch }

// View returns the ring's current view.
func (c *Cluster) View() *ring.View { return c.ring.View() }

// Ready reports whether this node routes by its ring (placement's join
// rule): a node started with seeds is not ready until it has joined one.
func (c *Cluster) Ready() bool { return c.placement().Joined() }

// Forget removes a failed member from the known members (`weir forget
// NAME`). A live member cannot be forgotten (CodeInvalid).
func (c *Cluster) Forget(name string) (bool, error) {
	if m, ok := c.ring.View().Member(name); ok && m.State.Live() {
		return false, api.Errorf(api.CodeInvalid, "member %q is alive: stop it or let it leave", name)
	}
	return c.ring.Forget(name), nil
}

// SetLimitsVersion gossips a new limits version.
func (c *Cluster) SetLimitsVersion(v int64) {
	m, ok := c.ring.View().Member(c.self)
	if !ok {
		return
	}
	meta := m.Meta
	meta.LimitsVersion = v
	c.ring.SetMeta(meta)
}

// Info reports membership for /v1/cluster and weir status, and the ring
// clients route by; with limit or key set it names the owner.
func (c *Cluster) Info(limit, key string) api.ClusterInfo {
	v := c.ring.View()
	info := api.ClusterInfo{Node: c.self, Epoch: v.Epoch}
	info.Ring = api.RingInfo{Table: v.Table(), Majority: v.Majority, Members: make([]api.RingMember, 0, len(v.Members))}
	for _, m := range v.Members {
		info.Members = append(info.Members, api.Member{Name: m.Name, Addr: m.Addr, State: m.State.String(), LimitsVersion: m.Meta.LimitsVersion})
		info.Ring.Members = append(info.Ring.Members, api.RingMember{Name: m.Name, GRPCAddr: m.Meta.APIAddr, HTTPAddr: m.Meta.HTTPAddr, RESPAddr: m.Meta.RESPAddr, State: m.State.String()})
	}
	if limit != "" || key != "" {
		if m, ok := v.OwnerSum(ring.KeySum(limit, key)); ok {
			info.Owner = m.Name
		}
	}
	return info
}
