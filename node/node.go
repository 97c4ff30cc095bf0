package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/api/authz"
	"github.com/weir-rl/weir/api/envoyrls"
	"github.com/weir-rl/weir/api/grpcapi"
	"github.com/weir-rl/weir/api/httpapi"
	"github.com/weir-rl/weir/api/resp"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/bucket"
	"github.com/weir-rl/weir/internal/dedup"
	"github.com/weir-rl/weir/internal/tlsreload"
	"github.com/weir-rl/weir/node/limits"
	"github.com/weir-rl/weir/node/placement"
	"github.com/weir-rl/weir/ring/ownership"
	"github.com/weir-rl/weir/transport"
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
	tls            *tlsreload.Reloader // nil: the public API is plaintext
	sm             *securityMetrics
	tokens         atomic.Pointer[auth.Policy] // nil: no tokens file, the API is open
	// cl is the cluster part, nil in a cluster of one. Start sets it once,
	// before any listener serves; it is read without mu.
	cl atomic.Pointer[cluster]
	// envoy is the envoyproxy/ratelimit configuration; nil without
	// Config.EnvoyConfigDir.
	envoy *envoyRules
	// merged is the limits file in force plus the envoy rules' limits: what
	// the engine decides by. mergeMu serializes its rebuilds.
	merged  atomic.Pointer[limits.File]
	mergeMu sync.Mutex

	mu       sync.Mutex // guards the fields below
	httpLn   net.Listener
	grpcLn   net.Listener
	respLn   net.Listener // nil when RESPAddr is ""
	respSrv  *resp.Server
	httpSrv  *http.Server
	grpcSrv  *grpc.Server
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
		// The process's own figures (go_goroutines, process_resident_memory_bytes,
		// process_open_fds), for operators and the hostile-input suite.
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
	n.m.bucketsMax.Set(float64(cfg.Store.MaxBuckets))
	n.limits = limits.NewReloader(cfg.LimitsPath, file, log, n.onReload)
	if err := n.newSecurity(); err != nil {
		return nil, err
	}
	if cfg.EnvoyConfigDir != "" {
		if n.envoy, err = newEnvoyRules(cfg.EnvoyConfigDir, log, reg, n.onEnvoyReload); err != nil {
			return nil, err
		}
	}
	if err := n.remerge(); err != nil {
		return nil, err
	}
	n.eng = &engine{
		now: clock, limits: n.merged.Load, store: store, fallback: fallback, m: n.m, hot: newHotKeys(), maxKey: cfg.maxKeyBytes(),
		counters: hotCounters{m: n.m, current: n.merged.Load},
		run:      cfg.NodeName + "/" + strconv.FormatUint(rand.Uint64()&0xffffff, 16),
	}
	dc := cfg.TakeDedup
	if dc == (dedup.Config{}) {
		dc = dedup.DefaultConfig()
	}
	n.eng.dedup = newTakeDedup(dc, reg)
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
	if err := n.remerge(); err != nil {
		n.log.Error("limits file loaded but not merged with the envoy rules", "err", err)
	}
	if c := n.cl.Load(); c != nil {
		c.setLimitsVersion(f.Version)
	}
	n.log.Info("limits reloaded", "source", f.Source, "version", f.Version, "limits", len(f.Limits))
}

// onEnvoyReload publishes the limits of a newly loaded envoy configuration.
func (n *Node) onEnvoyReload() {
	if err := n.remerge(); err != nil {
		n.log.Error("envoy config loaded but not merged with the limits file", "err", err)
	}
}

// remerge publishes the limits file in force plus the envoy rules' limits
// for the engine. The limits.Reloader and envoyRules publish their own value
// before they call it, so the last call sees both latest values.
func (n *Node) remerge() error {
	n.mergeMu.Lock()
	defer n.mergeMu.Unlock()
	base := n.limits.Current()
	c := n.envoy.current()
	if c == nil {
		n.merged.Store(base)
		return nil
	}
	f, err := base.WithLimits(envoyLimits(c))
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
	} else if n.envoy == nil {
		return errors.New("node: no limits file to reload (serving the embedded default)")
	}
	if n.envoy != nil {
		err = errors.Join(err, n.envoy.reload(true))
	}
	return err
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
	var respLn net.Listener
	if n.cfg.RESPAddr != "" {
		if respLn, err = net.Listen("tcp", n.cfg.RESPAddr); err != nil {
			_ = httpLn.Close()
			_ = grpcLn.Close()
			return fmt.Errorf("node: resp listen: %w", err)
		}
	}
	n.httpLn, n.grpcLn, n.respLn = httpLn, grpcLn, respLn
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if n.cfg.Clustered {
		if err := n.startCluster(runCtx); err != nil {
			cancel()
			_ = httpLn.Close()
			_ = grpcLn.Close()
			if respLn != nil {
				_ = respLn.Close()
			}
			return err
		}
	}
	metricsHandler := promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{})
	lim := n.cfg.Security.Limits.withDefaults()
	var httpTLS, grpcTLS *tls.Config
	if n.tls != nil {
		httpTLS, grpcTLS = n.tls.ServerConfig(), n.tls.ServerConfig()
	}
	public := authz.Decider(n, n.authConfig())
	httpLn, n.httpSrv = newHTTPServer(httpLn, httpapi.RequireTokens(httpapi.NewHandler(public, authz.Operator(n, n.authConfig()), n.httpConfig(), metricsHandler, n.log), n.authConfig()), lim, httpTLS, n.log)
	grpcLn = limitListener(grpcLn, lim)
	unaryAuth, streamAuth := grpcapi.AuthInterceptors(n.authConfig())
	n.grpcSrv = grpc.NewServer(grpcServerOptions(lim, grpcTLS, unaryAuth, streamAuth)...)
	// One key bound for every surface: the engine's (Config.HTTP.MaxKeyBytes).
	gc := grpcapi.DefaultConfig()
	gc.MaxKeyBytes = n.eng.maxKey
	grpcapi.Register(n.grpcSrv, public, gc)
	envoyCfg := n.cfg.Envoy
	envoyCfg.MaxKeyBytes = n.eng.maxKey
	envoyCfg.Now = n.eng.now
	if n.envoy != nil {
		envoyCfg.Rules = n.envoy.current
	}
	envoyrls.Register(n.grpcSrv, public, envoyCfg)
	n.runSecurity(runCtx)

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
	if respLn != nil {
		respLn = limitListener(respLn, lim)
		n.respSrv = resp.New(public, n.respConfig(), n.log)
		n.goRun(func() {
			if err := n.respSrv.Serve(respLn); err != nil && !errors.Is(err, resp.ErrServerClosed) {
				n.log.Error("resp server stopped", "err", err)
			}
		})
	}
	if n.cfg.LimitsPath != "" {
		n.goRun(func() {
			if err := n.limits.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				n.log.Warn("limits file watch stopped", "err", err)
			}
		})
	}
	if n.envoy != nil {
		n.goRun(func() {
			if err := n.envoy.run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				n.log.Warn("envoy config watch stopped", "err", err)
			}
		})
	}
	n.goRun(func() { n.leases.run(runCtx) })
	n.goRun(func() { n.fallbackLeases.run(runCtx) })
	if n.cfg.SweepInterval > 0 {
		n.goRun(func() { n.sweep(runCtx) })
	}
	if respLn != nil {
		n.log.Info("serving", "node", n.cfg.NodeName, "http", httpLn.Addr().String(), "grpc", grpcLn.Addr().String(), "resp", respLn.Addr().String())
	} else {
		n.log.Info("serving", "node", n.cfg.NodeName, "http", httpLn.Addr().String(), "grpc", grpcLn.Addr().String())
	}
	return nil
}

// httpConfig is Config.HTTP with the key bound in force.
func (n *Node) httpConfig() httpapi.Config {
	hc := n.cfg.HTTP
	hc.MaxKeyBytes = n.eng.maxKey
	return hc
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

// RESPAddr returns the bound Redis-protocol address, or "" before Start or
// when the endpoint is off.
func (n *Node) RESPAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.respLn == nil {
		return ""
	}
	return n.respLn.Addr().String()
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
	if n.respSrv != nil {
		if e := n.respSrv.Shutdown(ctx); e != nil && err == nil {
			err = fmt.Errorf("node: resp shutdown: %w", e)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		n.grpcSrv.Stop()
		<-done
	}
	if n.cl.Load() != nil {
		if e := n.stopCluster(ctx); e != nil && err == nil {
			err = e
		}
	}
	n.cancel()
	n.wg.Wait()
	return err
}

// Take implements api.Decider. The response carries the epoch of the view
// the take was routed by.
func (n *Node) Take(ctx context.Context, checks []api.Check) (api.TakeResponse, error) {
	start := time.Now()
	epoch := n.ringEpoch()
	resp, err := n.eng.take(ctx, checks)
	resp.RingEpoch = epoch
	n.m.takeLatency().Observe(time.Since(start).Seconds())
	return resp, err
}

// Cluster implements api.Decider.
func (n *Node) Cluster(_ context.Context, limit, key string) (api.ClusterInfo, error) {
	if c := n.cl.Load(); c != nil {
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
	info.Ring = api.RingInfo{
		Members:  []api.RingMember{{Name: n.cfg.NodeName, GRPCAddr: n.GRPCAddr(), HTTPAddr: n.HTTPAddr(), State: "alive"}},
		Table:    ownership.Build([]string{n.cfg.NodeName}, ownership.DefaultParams()),
		Majority: true,
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
	c := n.cl.Load()
	return c == nil || c.joined()
}

// Acquire implements api.Decider: at the key's owner, forwarded there, or
// from a local ceiling when the owner is unreachable.
func (n *Node) Acquire(ctx context.Context, req api.AcquireRequest) (api.AcquireResponse, error) {
	start := time.Now()
	defer func() { n.m.latency.WithLabelValues("acquire").Observe(time.Since(start).Seconds()) }()
	f := n.limits.Current()
	l, err := n.validateAcquire(f, req)
	if err != nil {
		return api.AcquireResponse{}, err
	}
	var resp api.AcquireResponse
	epoch := n.ringEpoch()
	forwarded := false
	switch p := n.placeLease(l.Name, req.Key); p.Kind {
	case placement.Here, placement.Replica:
		resp, err = n.acquireOwned(ctx, l, req)
	case placement.Forward:
		resp, err = n.cl.Load().acquireRemote(ctx, p.Addr, l, req)
		forwarded = err == nil
		var apiErr *api.Error
		if err != nil && !errors.As(err, &apiErr) {
			resp, err = n.acquireFallback(ctx, l, req)
		}
	default:
		resp, err = n.acquireFallback(ctx, l, req)
	}
	resp.RulesVersion = f.Version
	resp.RingEpoch, resp.Forwarded = epoch, forwarded && resp.Source == api.SourceOwner
	return resp, err
}

// ringEpoch is the epoch of the view requests are routed by; zero for a
// node that is not clustered.
func (n *Node) ringEpoch() uint64 {
	c := n.cl.Load()
	if c == nil {
		return 0
	}
	return c.ring.View().Epoch
}

// placeLease places a lease operation on (limit, key): here in a cluster
// of one.
func (n *Node) placeLease(limit, key string) placement.Placement {
	c := n.cl.Load()
	if c == nil {
		return placement.Placement{Kind: placement.Here}
	}
	return c.placeLease(limit, key)
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
	p := n.placeLease(l.Name, key)
	if n.fallbackLeases.holds(id) {
		if p.Kind == placement.Here || (p.Kind == placement.Forward && n.cl.Load().reachable(ctx, p.Addr)) {
			// Granted from a local ceiling while the owner was unreachable;
			// now that it answers again, only the owner's permits count.
			// The holder must acquire again there.
			n.fallbackLeases.release(id)
			return 0, api.Errorf(api.CodeNotFound, "lease was granted from a local ceiling and the owner is reachable again: acquire anew")
		}
		return n.fallbackLeases.renew(l, id, ttl)
	}
	switch p.Kind {
	case placement.Here, placement.Replica:
		return n.leases.renew(l, id, ttl)
	case placement.Forward:
		return n.cl.Load().leaseRemote(ctx, p.Addr, transport.OpRenew, id, ttl)
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
	switch p := n.placeLease(l.Name, key); p.Kind {
	case placement.Here, placement.Replica:
		n.leases.release(id)
		return nil
	case placement.Forward:
		_, err := n.cl.Load().leaseRemote(ctx, p.Addr, transport.OpRelease, id, 0)
		return err
	default:
		return api.Errorf(api.CodeUnavailable, "lease owner unreachable; the lease expires by itself")
	}
}

// Forget implements api.Decider: it removes a failed member from the known
// members (`weir forget NAME`). A live member cannot be forgotten.
func (n *Node) Forget(_ context.Context, name string) (bool, error) {
	c := n.cl.Load()
	if c == nil {
		return false, nil
	}
	if m, ok := c.ring.View().Member(name); ok && m.State.Live() {
		return false, api.Errorf(api.CodeInvalid, "member %q is alive: stop it or let it leave", name)
	}
	return c.ring.Forget(name), nil
}
