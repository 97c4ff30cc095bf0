package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/transport"
)

// Deps are the things a Node is handed rather than finding for itself, so
// tests can inject them: no global logger, registry or clock.
type Deps struct {
	// Logger receives structured logs. Nil discards them.
	Logger *slog.Logger
	// Registry collects the node's metrics and serves them on /metrics.
	// Nil makes a fresh one.
	Registry *prometheus.Registry
	// Clock returns the time decisions are made at. Nil is time.Now.
	Clock func() time.Time
	// ListenPeer opens the peer service's listener; nil is net.Listen.
	// Tests pass a simulated network's.
	ListenPeer func(network, addr string) (net.Listener, error)
}

// Node is one Weir member: the decision engine, the limits in force and the
// public HTTP and gRPC listeners. Its methods are safe for concurrent use.
type Node struct {
	cfg    Config
	log    *slog.Logger
	reg    *prometheus.Registry
	m      *metrics
	limits *limits.Reloader
	eng    *engine
	leases *leases
	// fallbackLeases holds permits granted from local ceilings while a
	// key's owner is unreachable.
	fallbackLeases *leases
	deps           Deps

	mu       sync.Mutex // guards the fields below
	httpLn   net.Listener
	grpcLn   net.Listener
	httpSrv  *http.Server
	grpcSrv  *grpc.Server
	cluster  *cluster // nil: a cluster of one
	peerLn   net.Listener
	peerSrv  *transport.Server
	pool     *transport.Pool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	started  bool
	shutdown bool
}

var _ api.Decider = (*Node)(nil)

// New builds a node from cfg: it loads the limits file (or the embedded
// default) and sets up the engine. It starts no goroutines and opens no
// sockets; Start does.
func New(cfg Config, deps Deps) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := deps.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	clock := deps.Clock
	if clock == nil {
		clock = time.Now
	}
	file := limits.Default()
	if cfg.LimitsPath != "" {
		var err error
		if file, err = limits.Load(cfg.LimitsPath); err != nil {
			return nil, err
		}
	}
	n := &Node{cfg: cfg, log: log, reg: reg, deps: deps}
	store := bucket.NewStore(cfg.Store)
	fallback := bucket.NewStore(cfg.FallbackStore)
	n.m = newMetrics(reg,
		func() float64 { return float64(store.Len()) },
		func() float64 { return float64(fallback.Len()) },
		func() float64 { return float64(store.Evictions() + fallback.Evictions()) },
		func() float64 { return n.leases.held() })
	// Seed fencing from the wall clock so a restarted owner, which lost its
	// counter, still issues tokens above those it issued before (lease doc).
	lc := cfg.Leases
	lc.FirstFencing = max(lc.FirstFencing, uint64(time.Now().UnixMicro()))
	lc.IDSeed = rand.Uint64()
	var err error
	if n.leases, err = newLeases(lc, clock, n.m); err != nil {
		return nil, err
	}
	lc.IDSeed = rand.Uint64()
	if n.fallbackLeases, err = newLeases(lc, clock, n.m); err != nil {
		return nil, err
	}
	n.m.limitsVersion.Set(float64(file.Version))
	n.limits = limits.NewReloader(cfg.LimitsPath, file, log, n.onReload)
	n.eng = &engine{
		now: clock, limits: n.limits.Current, store: store, fallback: fallback, m: n.m,
		counters: hotCounters{m: n.m, current: n.limits.Current},
		run:      cfg.NodeName + "/" + strconv.FormatUint(rand.Uint64()&0xffffff, 16),
	}
	return n, nil
}

// onReload counts a reload attempt of the limits file.
func (n *Node) onReload(f *limits.File, err error) {
	if err != nil {
		n.m.reloadFailures.Inc()
		return
	}
	n.m.reloads.Inc()
	n.m.limitsVersion.Set(float64(f.Version))
	n.mu.Lock()
	c := n.cluster
	n.mu.Unlock()
	if c != nil {
		c.setLimitsVersion(f.Version)
	}
	n.log.Info("limits reloaded", "source", f.Source, "version", f.Version, "limits", len(f.Limits))
}

// Limits returns the limits file in force.
func (n *Node) Limits() *limits.File { return n.limits.Current() }

// ReloadLimits re-reads the limits file, as on SIGHUP. A rejected file keeps
// the last valid one in force and is returned as the error.
func (n *Node) ReloadLimits() error {
	if n.cfg.LimitsPath == "" {
		return errors.New("node: no limits file to reload (serving the embedded default)")
	}
	return n.limits.Reload()
}

// Start opens the listeners and starts serving. It returns once the sockets
// are bound; serving goes on until Shutdown.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		return errors.New("node: already started")
	}
	httpLn, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("node: http listen: %w", err)
	}
	grpcLn, err := net.Listen("tcp", n.cfg.GRPCAddr)
	if err != nil {
		_ = httpLn.Close()
		return fmt.Errorf("node: grpc listen: %w", err)
	}
	n.httpLn, n.grpcLn = httpLn, grpcLn
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if n.cfg.Clustered {
		if err := n.startCluster(runCtx); err != nil {
			cancel()
			_ = httpLn.Close()
			_ = grpcLn.Close()
			return err
		}
	}
	metricsHandler := promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{})
	n.httpSrv = &http.Server{
		Handler:           api.NewHTTPHandler(n, n.cfg.HTTP, metricsHandler, n.log),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	// A client that connects and never completes its handshake would hold
	// GracefulStop/Stop for gRPC's default 120 s.
	n.grpcSrv = grpc.NewServer(grpc.ConnectionTimeout(10 * time.Second))
	api.RegisterGRPC(n.grpcSrv, n, api.DefaultGRPCConfig())
	api.RegisterEnvoy(n.grpcSrv, n, n.cfg.Envoy)

	n.cancel = cancel
	n.started = true
	n.goRun(func() {
		if err := n.httpSrv.Serve(httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server stopped", "err", err)
		}
	})
	n.goRun(func() {
		if err := n.grpcSrv.Serve(grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			n.log.Error("grpc server stopped", "err", err)
		}
	})
	if n.cfg.LimitsPath != "" {
		n.goRun(func() {
			if err := n.limits.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				n.log.Warn("limits file watch stopped", "err", err)
			}
		})
	}
	n.goRun(func() { n.leases.run(runCtx) })
	n.goRun(func() { n.fallbackLeases.run(runCtx) })
	if n.cfg.SweepInterval > 0 {
		n.goRun(func() { n.sweep(runCtx) })
	}
	n.log.Info("serving", "node", n.cfg.NodeName, "http", httpLn.Addr().String(), "grpc", grpcLn.Addr().String())
	return nil
}

func (n *Node) goRun(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// sweep evicts idle, fully refilled buckets every SweepInterval so memory
// follows the live key set rather than every key ever seen.
func (n *Node) sweep(ctx context.Context) {
	t := time.NewTicker(n.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := n.eng.now()
			n.eng.store.SweepAt(now, n.cfg.Store.MaxBuckets)
			n.eng.fallback.SweepAt(now, n.cfg.FallbackStore.MaxBuckets)
		}
	}
}

// HTTPAddr returns the bound HTTP address, or "" before Start.
func (n *Node) HTTPAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

// GRPCAddr returns the bound public gRPC address, or "" before Start.
func (n *Node) GRPCAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.grpcLn == nil {
		return ""
	}
	return n.grpcLn.Addr().String()
}

// Shutdown stops accepting, lets in-flight requests finish within ctx (and
// at most Config.ShutdownTimeout), then stops every goroutine the node
// started. It is safe to call more than once.
func (n *Node) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	if !n.started || n.shutdown {
		n.mu.Unlock()
		return nil
	}
	n.shutdown = true
	n.mu.Unlock()
	n.leases.drain()
	n.fallbackLeases.drain()

	ctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout)
	defer cancel()
	var err error
	done := make(chan struct{})
	go func() {
		n.grpcSrv.GracefulStop()
		close(done)
	}()
	if e := n.httpSrv.Shutdown(ctx); e != nil {
		err = fmt.Errorf("node: http shutdown: %w", e)
	}
	select {
	case <-done:
	case <-ctx.Done():
		n.grpcSrv.Stop()
		<-done
	}
	if n.cluster != nil {
		if e := n.stopCluster(ctx); e != nil && err == nil {
			err = e
		}
	}
	n.cancel()
	n.wg.Wait()
	return err
}

// Take implements api.Decider.
func (n *Node) Take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	start := time.Now()
	resp, err := n.eng.take(ctx, checks)
	n.m.takeLatency().Observe(time.Since(start).Seconds())
	return resp, err
}

// Cluster implements api.Decider.
func (n *Node) Cluster(_ context.Context, limit, key string) (api.ClusterInfo, error) {
	n.mu.Lock()
	c := n.cluster
	n.mu.Unlock()
	if c != nil {
		return c.info(limit, key), nil
	}
	info := api.ClusterInfo{
		Node:  n.cfg.NodeName,
		Epoch: 1,
		Members: []api.Member{{
			Name: n.cfg.NodeName, Addr: n.HTTPAddr(), State: "alive",
			LimitsVersion: n.limits.Current().Version,
		}},
	}
	if limit != "" || key != "" {
		info.Owner = n.cfg.NodeName
	}
	return info, nil
}

// Ready implements api.Decider: started, not shutting down, and, for a
// node started with --join, joined to a seed (docs/architecture.md §6.7).
func (n *Node) Ready() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started || n.shutdown {
		return false
	}
	return n.cluster == nil || n.cluster.joined(n.cluster.ring.View())
}

// Acquire implements api.Decider: at the key's owner, forwarded there, or
// from a local ceiling when the owner is unreachable.
func (n *Node) Acquire(ctx context.Context, req api.AcquireRequest) (api.AcquireResponse, error) {
	start := time.Now()
	defer func() { n.m.latency.WithLabelValues("acquire").Observe(time.Since(start).Seconds()) }()
	f := n.limits.Current()
	l, err := validateAcquire(f, req)
	if err != nil {
		return api.AcquireResponse{}, err
	}
	var resp api.AcquireResponse
	switch peer, self, ok := n.route(l.Name, req.Key); {
	case self:
		resp, err = n.acquireOwned(ctx, l, req)
	case ok:
		resp, err = n.cluster.acquireRemote(ctx, peer, l, req)
		var apiErr *api.Error
		if err != nil && !errors.As(err, &apiErr) {
			resp, err = n.acquireFallback(ctx, l, req)
		}
	default:
		resp, err = n.acquireFallback(ctx, l, req)
	}
	resp.RulesVersion = f.Version
	return resp, err
}

// route names the owner of (limit, key): this node in a cluster of one.
func (n *Node) route(limit, key string) (peer string, self, ok bool) {
	if n.cluster == nil {
		return "", true, true
	}
	return n.cluster.leaseOwner(limit, key)
}

// Renew implements api.Decider. A lease granted from a local ceiling is
// renewed where it was granted; others at the key's owner.
func (n *Node) Renew(ctx context.Context, id string, ttl time.Duration) (time.Duration, error) {
	if ttl < 0 {
		return 0, api.Errorf(api.CodeInvalid, "ttl must not be negative")
	}
	l, key, err := leaseLimit(n.limits.Current(), id)
	if err != nil {
		return 0, err
	}
	peer, self, ok := n.route(l.Name, key)
	if n.fallbackLeases.holds(id) {
		if self || (ok && n.cluster.reachable(ctx, peer)) {
			// Granted from a local ceiling while the owner was unreachable;
			// now that it answers again, only the owner's permits count.
			// The holder must acquire again there.
			n.fallbackLeases.release(id)
			return 0, api.Errorf(api.CodeNotFound, "lease was granted from a local ceiling and the owner is reachable again: acquire anew")
		}
		return n.fallbackLeases.renew(l, id, ttl)
	}
	switch {
	case self:
		return n.leases.renew(l, id, ttl)
	case ok:
		return n.cluster.leaseRemote(ctx, peer, transport.OpRenew, id, ttl)
	default:
		return 0, api.Errorf(api.CodeUnavailable, "lease owner unreachable")
	}
}

// Release implements api.Decider. Releasing what is not held is not an
// error; an unreachable owner is, since the permit stays held until expiry.
func (n *Node) Release(ctx context.Context, id string) error {
	l, key, err := leaseLimit(n.limits.Current(), id)
	if err != nil {
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.Code == api.CodeNotFound {
			return nil
		}
		return err
	}
	if n.fallbackLeases.holds(id) {
		n.fallbackLeases.release(id) // granted here from a local ceiling
		return nil
	}
	switch peer, self, ok := n.route(l.Name, key); {
	case self:
		n.leases.release(id)
		return nil
	case ok:
		_, err := n.cluster.leaseRemote(ctx, peer, transport.OpRelease, id, 0)
		return err
	default:
		return api.Errorf(api.CodeUnavailable, "lease owner unreachable; the lease expires by itself")
	}
}

// Forget implements api.Decider: it removes a failed member from the known
// members (`weir forget NAME`). A live member cannot be forgotten.
func (n *Node) Forget(_ context.Context, name string) (bool, error) {
	n.mu.Lock()
	c := n.cluster
	n.mu.Unlock()
	if c == nil {
		return false, nil
	}
	if m, ok := c.ring.View().Member(name); ok && m.State.Live() {
		return false, api.Errorf(api.CodeInvalid, "member %q is alive: stop it or let it leave", name)
	}
	return c.ring.Forget(name), nil
}
