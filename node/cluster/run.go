package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	sockaddr "github.com/hashicorp/go-sockaddr"

	"github.com/weir-rl/weir/ring"
	"github.com/weir-rl/weir/ring/gossip"
	"github.com/weir-rl/weir/transport"
)

// Serve is what a started member serves: the engine it decides forwards
// with and whose state it hands over, this node's report for operators,
// and the public addresses clients are told to dial.
type Serve struct {
	// Owner decides what peers forward here.
	Owner Owner
	// Holdings is the owner state handed over, taken in and replicated.
	Holdings Holdings
	// Report returns this node's summary for a peer's operator request.
	Report func(transport.ReportRequest) transport.Report
	// APIAddr and HTTPAddr are the bound public gRPC and HTTP addresses;
	// RESPAddr the bound Redis-protocol address, "" when it is off.
	APIAddr, HTTPAddr, RESPAddr string
}

// Start opens the peer service, joins the gossip and starts the member's
// goroutines: the peer server, the watch of ring changes and the
// replication stream. They run until Stop. Start returns once the ring has
// started (memberlist joined a seed, or ctx ended).
func (c *Cluster) Start(ctx context.Context, s Serve) error {
	ln, err := c.listen("tcp", c.cfg.PeerAddr)
	if err != nil {
		return fmt.Errorf("node: peer listen: %w", err)
	}
	advertise, err := c.peerAdvertise(ln.Addr().String())
	if err != nil {
		_ = ln.Close()
		return err
	}
	c.run = s
	m, _ := c.ring.View().Member(c.self)
	self := m.Meta
	self.GRPCAddr = advertise
	self.APIAddr = publicAdvertise(s.APIAddr, advertise)
	self.HTTPAddr = publicAdvertise(s.HTTPAddr, advertise)
	if s.RESPAddr != "" {
		self.RESPAddr = publicAdvertise(s.RESPAddr, advertise)
	}
	c.ring.SetMeta(self)
	c.srv = transport.NewServer(peerHandler{c: c}, c.cfg.Credentials)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := c.ring.Start(runCtx); err != nil {
		cancel()
		_ = ln.Close()
		_ = c.pool.Close()
		return fmt.Errorf("node: gossip: %w", err)
	}
	c.peerLn, c.cancel = ln, cancel
	c.wg.Go(func() {
		if err := c.srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			c.log.Error("peer server stopped", "err", err)
		}
	})
	c.wg.Go(func() { c.watch(runCtx) })
	c.wg.Go(func() { c.repl.stream(runCtx, c) })
	c.log.Info("cluster started", "gossip", c.cfg.Ring.BindAddr, "peer", advertise, "join", c.cfg.Ring.Join,
		"gossip_encrypted", c.cfg.GossipKey != nil, "peer_tls", c.cfg.Credentials.String())
	return nil
}

// Stop hands this node's state off, leaves the gossip (within
// LeaveTimeout), stops the peer service (gracefully within ctx) and waits
// for every goroutine Start started. A leave no member acknowledged is
// logged as a warning and not returned: the state was handed off already.
func (c *Cluster) Stop(ctx context.Context) error {
	err := c.leave(ctx, c.cfg.LeaveTimeout)
	switch {
	case errors.Is(err, gossip.ErrLeaveUnacknowledged):
		// State went to the owners before the leave; a broadcast nobody
		// took (every member stopping at once) is expected, not a failure.
		c.log.Warn("leave not acknowledged: no member took the broadcast; stopping anyway", "err", err)
		err = nil
	case err != nil:
		c.log.Warn("leave", "err", err)
	}
	stopped := make(chan struct{})
	go func() {
		c.srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		c.srv.Stop()
		<-stopped
	}
	_ = c.pool.Close()
	if e := c.ring.Close(); e != nil && err == nil {
		err = e
	}
	c.cancel()
	c.wg.Wait()
	return err
}

// peerAdvertise picks the peer address other members dial.
func (c *Cluster) peerAdvertise(bound string) (string, error) {
	if c.cfg.PeerAdvertise != "" {
		return c.cfg.PeerAdvertise, nil
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return "", fmt.Errorf("node: peer address %q: %w", bound, err)
	}
	if c.cfg.Ring.AdvertiseAddr != "" {
		return net.JoinHostPort(c.cfg.Ring.AdvertiseAddr, port), nil
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		priv, err := sockaddr.GetPrivateIP()
		if err != nil || priv == "" {
			return "", errors.New("node: cannot pick a peer address to advertise: set --advertise-addr")
		}
		return net.JoinHostPort(priv, port), nil
	}
	return bound, nil
}

// publicAdvertise picks the public address (HTTP or gRPC API) clients are
// told to dial for a listener bound at bound: bound itself, unless its host
// is unspecified (0.0.0.0, ::), in which case the host of the peer address
// this node advertises, with bound's port.
func publicAdvertise(bound, peer string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		return bound
	}
	if h, _, err := net.SplitHostPort(peer); err == nil {
		return net.JoinHostPort(h, port)
	}
	return bound
}

// PeerReport is one member's answer to an operator request, or why there
// is none.
type PeerReport struct {
	Member ring.Member
	Report transport.Report
	OK     bool
}

// Reports asks every live member but this one for its report, at once
// within ctx, and returns them with this node's own (self), in member
// order, and the view they were asked by. A member that is not live or
// does not answer in time has OK false.
func (c *Cluster) Reports(ctx context.Context, req transport.ReportRequest, self transport.Report) (*ring.View, []PeerReport) {
	v := c.ring.View()
	out := make([]PeerReport, len(v.Members))
	var wg sync.WaitGroup
	for i, m := range v.Members {
		out[i].Member = m
		switch {
		case m.Name == v.Self:
			out[i].Report, out[i].OK = self, true
		case m.State.Live() && m.Meta.GRPCAddr != "":
			wg.Go(func() {
				rep, err := c.pool.Report(ctx, m.Meta.GRPCAddr, req)
				out[i].Report, out[i].OK = rep, err == nil
			})
		}
	}
	wg.Wait()
	return v, out
}
