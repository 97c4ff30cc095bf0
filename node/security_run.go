package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/weir-rl/weir/internal/tlsreload"
)

// newSecurity loads the public TLS certificate (and, later, the tokens
// file) named in the configuration. Called from New.
func (n *Node) newSecurity() error {
	sec := n.cfg.Security
	n.sm = newSecurityMetrics(n.reg)
	if sec.TLS.Enabled() {
		r, err := tlsreload.New(sec.TLS, n.log, n.onTLSReload)
		if err != nil {
			return fmt.Errorf("node: public TLS: %w", err)
		}
		n.tls = r
	}
	return nil
}

// onTLSReload counts a certificate reload attempt.
func (n *Node) onTLSReload(err error) {
	if err != nil {
		n.sm.tlsReloads.WithLabelValues("failure").Inc()
		return
	}
	n.sm.tlsReloads.WithLabelValues("success").Inc()
}

// runSecurity starts the watchers of the security files. Called from
// Start with n.mu held.
func (n *Node) runSecurity(ctx context.Context) {
	if r := n.tls; r != nil {
		n.goRun(func() {
			if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				n.log.Warn("TLS certificate watch stopped", "err", err)
			}
		})
	}
}

// ReloadTLS re-reads the public TLS certificate files, as on SIGHUP. It
// does nothing without TLS.
func (n *Node) ReloadTLS() error {
	if n.tls == nil {
		return nil
	}
	return n.tls.Reload()
}

// securityMetrics count what the security layer refuses and reloads.
type securityMetrics struct {
	tlsReloads   *prometheus.CounterVec // result
	authFailures *prometheus.CounterVec // reason
}

func newSecurityMetrics(reg prometheus.Registerer) *securityMetrics {
	m := &securityMetrics{
		tlsReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_tls_reloads_total", Help: "Reloads of the public TLS certificate files, by result (success, failure).",
		}, []string{"result"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_auth_failures_total", Help: "Requests refused by caller authentication or authorisation, by reason.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.tlsReloads, m.authFailures)
	return m
}

// securedHTTP wraps the public HTTP handler with caller authentication.
func (n *Node) securedHTTP(h http.Handler) http.Handler { return h }

// grpcUnaryAuth and grpcStreamAuth are the public gRPC server's
// authentication interceptors, nil without a tokens file.
func (n *Node) grpcUnaryAuth() grpc.UnaryServerInterceptor   { return nil }
func (n *Node) grpcStreamAuth() grpc.StreamServerInterceptor { return nil }
