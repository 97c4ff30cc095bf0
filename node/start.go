package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/weir-rl/weir/api/authz"
	"github.com/weir-rl/weir/api/envoyrls"
	"github.com/weir-rl/weir/api/grpcapi"
	"github.com/weir-rl/weir/api/httpapi"
	"github.com/weir-rl/weir/api/resp"
	"github.com/weir-rl/weir/api/rlqs"
	"github.com/weir-rl/weir/node/cluster"
	"github.com/weir-rl/weir/transport"
)

// Start opens the listeners, joins the cluster and starts serving. It
// returns once the sockets are bound; serving goes on until Shutdown.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		return errors.New("node: already started")
	}
	// The saved state goes in before the node serves or joins; its file
	// is removed once the node runs (a failed start keeps it).
	restored, err := n.restoreState()
	if err != nil {
		return err
	}
	lns, err := n.listen()
	if err != nil {
		return err
	}
	n.httpLn, n.grpcLn, n.respLn = lns[0], lns[1], lns[2]
	if err := n.tracer.Start(ctx); err != nil {
		for _, ln := range lns {
			if ln != nil {
				_ = ln.Close()
			}
		}
		return err
	}
	var respAddr string // n.mu is held: not n.RESPAddr()
	if n.respLn != nil {
		respAddr = n.respLn.Addr().String()
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	err = n.members.Start(runCtx, cluster.Serve{
		Owner: n.eng, Holdings: n.eng, Report: n.localReport,
		APIAddr: n.grpcLn.Addr().String(), HTTPAddr: n.httpLn.Addr().String(), RESPAddr: respAddr,
	})
	if err != nil {
		cancel()
		_ = n.tracer.Shutdown(ctx)
		for _, ln := range lns {
			if ln != nil {
				_ = ln.Close()
			}
		}
		return err
	}
	serving, serve := n.publicServers()
	n.runSecurity(runCtx)
	n.cancel = cancel
	n.started = true
	if restored {
		n.dropState()
	}
	for i, ln := range serving {
		n.goRun(func() { serve[i](ln) })
	}
	n.goRun(func() {
		if err := n.limits.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			n.log.Warn("limits file watch stopped", "err", err)
		}
	})
	n.goRun(func() {
		if err := n.envoy.run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			n.log.Warn("envoy config watch stopped", "err", err)
		}
	})
	n.goRun(func() { n.eng.Run(runCtx) })
	attrs := []any{"node", n.cfg.NodeName}
	for i, name := range []string{"http", "grpc", "resp"} {
		if i < len(serving) {
			attrs = append(attrs, name, serving[i].Addr().String())
		}
	}
	n.log.Info("serving", attrs...)
	return nil
}

// publicServers builds the public HTTP, gRPC (weir.v1.Limiter, Envoy's
// rate limit service and its quota service) and, when configured, RESP servers on the bound
// listeners, bounded by the server limits and behind the caller policy,
// and returns each listener with the function that serves it. Called
// with n.mu held.
func (n *Node) publicServers() ([]net.Listener, []func(net.Listener)) {
	lim := n.cfg.Security.Limits.withDefaults()
	httpTLS, grpcTLS := n.tls.ServerConfig(), n.tls.ServerConfig()
	ac := n.authConfig()
	public := authz.Decider(n, ac)
	metricsHandler := promhttp.HandlerFor(n.reg, promhttp.HandlerOpts{})
	handler := httpapi.NewHandler(public, authz.Operator(n, ac), n.httpConfig(), metricsHandler, n.log)
	httpLn, httpSrv := newHTTPServer(n.httpLn, httpapi.RequireTokens(handler, ac), lim, httpTLS, n.log)
	unaryAuth, streamAuth := grpcapi.AuthInterceptors(ac)
	n.grpcSrv = grpc.NewServer(append(grpcServerOptions(lim, grpcTLS, unaryAuth, streamAuth), n.tracer.GRPCServerOptions()...)...)
	n.stops = []func(context.Context) error{httpSrv.Shutdown}
	// One key bound for every surface: the engine's (Config.HTTP.MaxKeyBytes).
	gc := grpcapi.DefaultConfig()
	gc.MaxKeyBytes = n.cfg.maxKeyBytes()
	n.limiter = grpcapi.Register(n.grpcSrv, public, gc)
	envoyCfg := n.cfg.Envoy
	envoyCfg.MaxKeyBytes = n.cfg.maxKeyBytes()
	envoyCfg.Now = n.clock
	envoyCfg.Rules = n.envoy.current
	envoyCfg.Authorize = ac.AuthorizeChecks
	envoyrls.Register(n.grpcSrv, public, envoyCfg)
	rlqsCfg := n.cfg.RLQS
	rlqsCfg.MaxKeyBytes = n.cfg.maxKeyBytes()
	rlqsCfg.Now = n.clock
	n.rlqs = rlqs.Register(n.grpcSrv, public, rlqsCfg)
	lns := []net.Listener{httpLn, limitListener(n.grpcLn, lim)}
	serve := []func(net.Listener){
		func(ln net.Listener) {
			if err := httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("http server stopped", "err", err)
			}
		},
		func(ln net.Listener) {
			if err := n.grpcSrv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				n.log.Error("grpc server stopped", "err", err)
			}
		},
	}
	if n.cfg.RESPAddr != "" {
		respSrv := resp.New(public, n.respConfig(), n.log)
		n.stops = append(n.stops, respSrv.Shutdown)
		lns = append(lns, limitListener(n.respLn, lim))
		serve = append(serve, func(ln net.Listener) {
			if err := respSrv.Serve(ln); err != nil && !errors.Is(err, resp.ErrServerClosed) {
				n.log.Error("resp server stopped", "err", err)
			}
		})
	}
	return lns, serve
}

// listen binds the public listeners: HTTP, gRPC and, when RESPAddr is
// set, RESP (nil otherwise).
func (n *Node) listen() ([3]net.Listener, error) {
	var lns [3]net.Listener
	addrs := [3]string{n.cfg.HTTPAddr, n.cfg.GRPCAddr, n.cfg.RESPAddr}
	names := [3]string{"http", "grpc", "resp"}
	for i, addr := range addrs {
		if addr == "" {
			continue // RESP off
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns[:i] {
				if l != nil {
					_ = l.Close()
				}
			}
			return lns, fmt.Errorf("node: %s listen: %w", names[i], err)
		}
		lns[i] = ln
	}
	return lns, nil
}

// httpConfig is Config.HTTP with the key bound in force.
func (n *Node) httpConfig() httpapi.Config {
	hc := n.cfg.HTTP
	hc.MaxKeyBytes = n.cfg.maxKeyBytes()
	return hc
}

func (n *Node) goRun(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// HTTPAddr returns the bound HTTP address, or "" before Start.
func (n *Node) HTTPAddr() string { return n.addr(&n.httpLn) }

// GRPCAddr returns the bound public gRPC address, or "" before Start.
func (n *Node) GRPCAddr() string { return n.addr(&n.grpcLn) }

// RESPAddr returns the bound Redis-protocol address, or "" before Start or
// when the endpoint is off.
func (n *Node) RESPAddr() string { return n.addr(&n.respLn) }

func (n *Node) addr(ln *net.Listener) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if *ln == nil {
		return ""
	}
	return (*ln).Addr().String()
}

// Shutdown stops accepting, lets in-flight requests finish within ctx (and
// at most Config.ShutdownTimeout), then, within ctx and a bound of its own
// (3×Config.LeaveTimeout; ShutdownTimeout again when not clustered),
// hands the node's state off, leaves the cluster and stops every
// goroutine the node started. It is safe to call more than once.
func (n *Node) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	if !n.started || n.shutdown {
		n.mu.Unlock()
		return nil
	}
	n.shutdown = true
	n.mu.Unlock()
	n.eng.Drain()

	err := n.drainPublic(ctx)
	// The handoff gets its own bound, not what the drain left of
	// ShutdownTimeout: a caller that held its request to the drain's end
	// must not cost the buckets their handoff (without it their new
	// owners start them full) nor the cluster a clean leave.
	ctx, cancel := context.WithTimeout(ctx, n.cfg.leaveBound())
	defer cancel()
	// No caller is served any more: the allotments this node holds go back
	// to their owners while the peers are still there to take them.
	n.eng.ReturnAll(ctx)
	if e := n.members.Stop(ctx); e != nil && err == nil {
		err = e
	}
	n.cancel()
	n.wg.Wait()
	// Nothing decides any more and the peers took what they would: what
	// is left in debt goes to the state file (Config.StateDir).
	if e := n.saveState(); e != nil && err == nil {
		err = e
	}
	// Every span has ended: the servers answered their last request. What
	// the batch processor still holds leaves now, within ctx.
	if e := n.tracer.Shutdown(ctx); e != nil && err == nil {
		err = e
	}
	return err
}

// drainPublic stops the public servers from accepting and lets their
// in-flight requests finish within ctx and Config.ShutdownTimeout; then
// it closes what is left.
func (n *Node) drainPublic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout)
	defer cancel()
	var err error
	done := make(chan struct{})
	go func() {
		n.rlqs.Drain()    // Envoy never closes its quota streams
		n.limiter.Drain() // nor does the Go client its take streams
		n.grpcSrv.GracefulStop()
		close(done)
	}()
	for i, stop := range n.stops {
		if e := stop(ctx); e != nil && err == nil {
			err = fmt.Errorf("node: %s shutdown: %w", [...]string{"http", "resp"}[i], e)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		n.grpcSrv.Stop()
		<-done
	}
	return err
}

// peerSecurity reads the cluster secret and derives the gossip key and the
// peer credentials from it; operator peer certificates, when configured,
// replace the derived ones. Neither: no gossip key, nil credentials
// (plaintext).
func peerSecurity(cfg Config) (gossipKey []byte, creds *transport.Credentials, err error) {
	if cfg.ClusterSecretFile != "" {
		secret, err := transport.ReadSecretFile(cfg.ClusterSecretFile)
		if err != nil {
			return nil, nil, fmt.Errorf("node: cluster secret: %w", err)
		}
		gk, _ := transport.DeriveKeys(secret)
		gossipKey = gk[:]
		if creds, err = transport.SecretCredentials(secret); err != nil {
			return nil, nil, fmt.Errorf("node: %w", err)
		}
	}
	if p := cfg.Security.PeerTLS; p.CertFile != "" {
		if creds, err = transport.FileCredentials(p.CertFile, p.KeyFile, p.CAFile); err != nil {
			return nil, nil, fmt.Errorf("node: %w", err)
		}
	}
	return gossipKey, creds, nil
}
