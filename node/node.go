package node

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/grpcapi"
	"github.com/weir-rl/weir/api/rlqs"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/internal/filewatch"
	"github.com/weir-rl/weir/internal/tracing"
	"github.com/weir-rl/weir/node/cluster"
	"github.com/weir-rl/weir/node/engine"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/ring"
)

// Deps are the things a Node is handed rather than finding for itself, so
// tests can inject them: no global logger, registry or clock.
type Deps struct {
	// Logger receives structured logs. Nil discards them.
	Logger *slog.Logger
	// Registry collects the node's metrics and serves them on /metrics.
	// Nil makes a fresh one, with the Go runtime and process collectors.
	Registry *prometheus.Registry
	// Clock returns the time decisions are made at. Nil is time.Now.
	Clock func() time.Time
	// ListenPeer opens the peer service's listener; nil is net.Listen.
	// Tests pass a simulated network's.
	ListenPeer func(network, addr string) (net.Listener, error)
}

// Node is one Weir member: the limits in force, the decision engine, its
// part in the cluster and the public listeners. Its methods are safe for
// concurrent use.
type Node struct {
	cfg    Config
	log    *slog.Logger
	reg    *prometheus.Registry
	clock  func() time.Time
	m      *metrics
	limits *limits.Reloader
	// envoy is the envoyproxy/ratelimit configuration (noEnvoyRules
	// without Config.EnvoyConfigDir).
	envoy envoySource
	// merged is the limits file in force plus the envoy rules' limits:
	// the limits in force for every decision. mergeMu serializes its
	// rebuilds.
	merged  atomic.Pointer[limits.File]
	mergeMu sync.Mutex
	eng     *engine.Engine
	members members   // *cluster.Cluster, or alone
	tls     publicTLS // plaintext{} without a certificate
	sm      *securityMetrics
	tokens  atomic.Pointer[auth.Policy] // nil: no tokens file, the API is open
	tracer  *tracing.Tracer             // the zero Tracer when Config.Tracing is off

	// tokensMu serializes tokens file loads and guards tokensStamp, the
	// file as it was just before the last good load.
	tokensMu    sync.Mutex
	tokensStamp filewatch.Stamp

	mu      sync.Mutex // guards the fields below
	httpLn  net.Listener
	grpcLn  net.Listener
	respLn  net.Listener // nil when RESPAddr is ""
	grpcSrv *grpc.Server
	rlqs    *rlqs.Server    // Envoy's quota service on grpcSrv, drained on shutdown
	limiter *grpcapi.Server // weir.v1.Limiter on grpcSrv, its streams drained on shutdown
	// stops shut the HTTP and (when on) RESP servers down gracefully.
	stops    []func(context.Context) error
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	started  bool
	shutdown bool
}

var _ api.Decider = (*Node)(nil)

// New builds a node from cfg: it loads the limits file (or the embedded
// default), the tokens file, the TLS certificate, the envoy rules and the
// cluster secret, and builds the engine and the node's part in the
// cluster. It starts no goroutines and opens no sockets; Start does.
func New(cfg Config, deps Deps) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: deps.Logger, reg: deps.Registry, clock: deps.Clock}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.reg == nil {
		n.reg = prometheus.NewRegistry()
		// The process's own figures (go_goroutines, process_resident_memory_bytes,
		// process_open_fds), for operators and the hostile-input suite.
		n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if n.clock == nil {
		n.clock = time.Now
	}
	file := limits.Default()
	if cfg.LimitsPath != "" {
		var err error
		if file, err = limits.Load(cfg.LimitsPath); err != nil {
			return nil, err
		}
	}
	tracer, err := tracing.New(cfg.Tracing, cfg.NodeName)
	if err != nil {
		return nil, err
	}
	n.tracer = tracer
	n.m = newMetrics(n.reg)
	n.m.limitsVersion.Set(float64(file.Version))
	n.limits = limits.NewReloader(cfg.LimitsPath, file, n.log, n.onReload)
	if err := n.newSecurity(); err != nil {
		return nil, err
	}
	envoy, err := newEnvoySource(cfg.EnvoyConfigDir, n.log, n.reg, n.onEnvoyReload)
	if err != nil {
		return nil, err
	}
	n.envoy = envoy
	if err := n.remerge(); err != nil {
		return nil, err
	}
	parts, err := n.newMembers(file.Version, deps.ListenPeer)
	if err != nil {
		return nil, err
	}
	n.eng, err = engine.New(engine.Config{
		Name: cfg.NodeName, Store: cfg.Store, FallbackStore: cfg.FallbackStore, Leases: cfg.Leases,
		MaxKeyBytes: cfg.maxKeyBytes(), TakeDedup: cfg.TakeDedup, SweepInterval: cfg.SweepInterval,
	}, engine.Deps{
		Limits: n.merged.Load, Clock: n.clock, Registry: n.reg,
		Router: parts.router, Peers: parts.peers, Changes: parts.changes,
	})
	if err != nil {
		return nil, err
	}
	n.members = parts.members
	return n, nil
}

// clusterParts are the node's part in its cluster, as the engine and the
// node see it.
type clusterParts struct {
	members members
	router  engine.Router
	peers   engine.Peers
	changes engine.Changes
}

// newMembers builds the node's part in its cluster: a cluster member
// (not yet gossiping) when Config.Clustered, else a cluster of one.
func (n *Node) newMembers(version int64, listen func(network, addr string) (net.Listener, error)) (clusterParts, error) {
	cfg := n.cfg
	if !cfg.Clustered {
		return clusterParts{members: newAlone(cfg.NodeName, version), router: engine.SingleNode{}, peers: engine.NoPeers{}, changes: engine.NoChanges{}}, nil
	}
	gossipKey, creds, err := peerSecurity(cfg)
	if err != nil {
		return clusterParts{}, err
	}
	rc := cfg.Timing.ring(cfg.Ring)
	decryptFailures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_gossip_decrypt_failures_total",
		Help: "Gossip packets and streams that failed to decrypt: senders without the cluster secret (logged at most every 10s).",
	})
	if err := n.reg.Register(decryptFailures); err != nil {
		return clusterParts{}, err
	}
	if rc.OnDecryptFailure == nil {
		rc.OnDecryptFailure = decryptFailures.Inc
	}
	if rc.KeyHint == "" {
		rc.KeyHint = secretHint
	}
	c, err := cluster.New(cluster.Config{
		Self: cfg.NodeName, Ring: rc, GossipKey: gossipKey, Forward: cfg.Forward, Credentials: creds,
		PeerAddr: cfg.PeerListenAddr(), PeerAdvertise: cfg.PeerAdvertise,
		HandoffWindow: cfg.Timing.HandoffWindow, TakeoverDelay: cfg.Timing.TakeoverDelay,
		LeaveTimeout: cfg.LeaveTimeout, Replication: cfg.Replication,
	}, cluster.Deps{
		Logger: n.log, Registry: n.reg, Clock: n.clock, Limits: n.merged.Load, ListenPeer: listen,
		Meta:   ring.Meta{LimitsVersion: version, Incarnation: time.Now().UnixNano()},
		Tracer: n.tracer,
	})
	if err != nil {
		return clusterParts{}, err
	}
	return clusterParts{members: c, router: c, peers: c, changes: c}, nil
}

// onReload counts a reload attempt of the limits file.
func (n *Node) onReload(f *limits.File, err error) {
	if err != nil {
		n.m.reloadFailures.Inc()
		return
	}
	n.m.reloads.Inc()
	n.m.limitsVersion.Set(float64(f.Version))
	if err := n.remerge(); err != nil {
		n.log.Error("limits file loaded but not merged with the envoy rules", "err", err)
	}
	n.members.SetLimitsVersion(f.Version)
	n.log.Info("limits reloaded", "source", f.Source, "version", f.Version, "limits", len(f.Limits))
}

// onEnvoyReload publishes the limits of a newly loaded envoy configuration.
func (n *Node) onEnvoyReload() {
	if err := n.remerge(); err != nil {
		n.log.Error("envoy config loaded but not merged with the limits file", "err", err)
	}
}

// remerge publishes the limits file in force plus the envoy rules' limits
// for the engine. The limits.Reloader and the envoy rules publish their
// own value before they call it, so the last call sees both latest values.
func (n *Node) remerge() error {
	n.mergeMu.Lock()
	defer n.mergeMu.Unlock()
	f, err := n.envoy.merge(n.limits.Current())
	if err != nil {
		return err
	}
	n.merged.Store(f)
	return nil
}

// Limits returns the limits file in force.
func (n *Node) Limits() *limits.File { return n.limits.Current() }

// ReloadLimits re-reads the limits file and the envoy configuration
// directory, as on SIGHUP. A rejected file keeps the last valid one in force
// and is returned as the error.
func (n *Node) ReloadLimits() error {
	var err error
	if n.cfg.LimitsPath != "" {
		err = n.limits.Reload()
	} else if n.cfg.EnvoyConfigDir == "" {
		return errors.New("node: no limits file to reload (serving the embedded default)")
	}
	return errors.Join(err, n.envoy.reload(true))
}

// Take implements api.Decider. The response carries the epoch of the view
// the take was routed by.
func (n *Node) Take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	epoch := n.members.Epoch()
	ctx, span := n.tracer.Decision(ctx)
	resp, err := n.eng.Take(ctx, checks)
	resp.RingEpoch = epoch
	span.EndTake(checks, resp, err)
	return resp, err
}

// Acquire implements api.Decider: at the key's owner, forwarded there, or
// from a local ceiling when the owner is unreachable.
func (n *Node) Acquire(ctx context.Context, req api.AcquireRequest) (api.AcquireResponse, error) {
	epoch := n.members.Epoch()
	resp, err := n.eng.Acquire(ctx, req)
	resp.RingEpoch = epoch
	return resp, err
}

// Renew implements api.Decider. A lease granted from a local ceiling is
// renewed where it was granted; others at the key's owner.
func (n *Node) Renew(ctx context.Context, id string, ttl time.Duration) (time.Duration, error) {
	return n.eng.Renew(ctx, id, ttl)
}

// Release implements api.Decider. Releasing what is not held is not an
// error; an unreachable owner is, since the permit stays held until expiry.
func (n *Node) Release(ctx context.Context, id string) error { return n.eng.Release(ctx, id) }

// Cluster implements api.Decider.
func (n *Node) Cluster(_ context.Context, limit, key string) (api.ClusterInfo, error) {
	return n.members.Info(limit, key), nil
}

// secretHint names where the cluster secret comes from, for the warning of
// a node whose joins no member accepts (gossip.Config.KeyHint).
const secretHint = "--cluster-secret-file (WEIR_CLUSTER_SECRET_FILE)"

// Reasons a node is not ready, as Readiness names them.
const (
	notReadyStarting = "starting: the listeners are not serving yet"
	notReadyStopping = "shutting down"
	notReadyUnjoined = "not joined: no member has accepted this node's gossip yet " +
		"(check --join, and that --cluster-secret-file matches the cluster's)"
)

// Readiness implements api.Decider: ready once started, not shutting down,
// and, for a node started with --join, joined to a seed (docs/architecture.md
// §6.7); otherwise the reason names the first of these that fails.
func (n *Node) Readiness() api.Readiness {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case !n.started:
		return api.Readiness{Reason: notReadyStarting}
	case n.shutdown:
		return api.Readiness{Reason: notReadyStopping}
	case !n.members.Ready():
		return api.Readiness{Reason: notReadyUnjoined}
	}
	return api.Readiness{Ready: true}
}

// Ready is shorthand for Readiness().Ready.
func (n *Node) Ready() bool { return n.Readiness().Ready }

// Forget implements api.Decider: it removes a failed member from the known
// members (`weir forget NAME`). A live member cannot be forgotten.
func (n *Node) Forget(_ context.Context, name string) (bool, error) {
	return n.members.Forget(name)
}

// Allot implements api.Decider: an allotment for a client holder, at the
// key's owner.
func (n *Node) Allot(ctx context.Context, req api.AllotRequest) (api.AllotResponse, error) {
	return n.eng.Allot(ctx, req)
}

// Return implements api.Decider: a client holder's allotment back to the
// key's owner.
func (n *Node) Return(ctx context.Context, req api.ReturnRequest) error {
	return n.eng.Return(ctx, req)
}
