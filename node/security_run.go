package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-rl/weir/api/authz"
	"github.com/weir-rl/weir/api/resp"
	"github.com/weir-rl/weir/auth"
	"github.com/weir-rl/weir/internal/filewatch"
	"github.com/weir-rl/weir/internal/tlsreload"
)

// newSecurity loads the public TLS certificate (and, later, the tokens
// file) named in the configuration. Called from New.
func (n *Node) newSecurity() error {
	sec := n.cfg.Security
	n.sm = newSecurityMetrics(n.reg)
	if sec.TokensFile != "" {
		if err := n.loadTokens(); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	n.tls = plaintext{}
	if sec.TLS.Enabled() {
		r, err := tlsreload.New(sec.TLS, n.log, n.onTLSReload)
		if err != nil {
			return fmt.Errorf("node: public TLS: %w", err)
		}
		n.tls = r
	}
	return nil
}

// publicTLS is the public listeners' TLS: a tlsreload.Reloader serving
// certificate files that reload when they change, or plaintext.
type publicTLS interface {
	// ServerConfig returns the listeners' TLS configuration; nil serves
	// plaintext.
	ServerConfig() *tls.Config
	// Run watches the certificate files until ctx ends.
	Run(ctx context.Context) error
	// Reload re-reads the certificate files.
	Reload() error
}

// plaintext is the publicTLS of a node without a certificate: no TLS,
// nothing to watch or reload.
type plaintext struct{}

func (plaintext) ServerConfig() *tls.Config { return nil }
func (plaintext) Run(context.Context) error { return nil }
func (plaintext) Reload() error             { return nil }

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
	if p := n.tokens.Load(); p != nil {
		n.log.Info("caller tokens in force", "file", p.Source, "tokens", len(p.Tokens()), "protect_metrics", n.cfg.Security.ProtectMetrics)
	} else {
		n.log.Warn("no tokens file: the public API is open to anyone who can reach it (see --tokens-file)")
	}
	if path := n.cfg.Security.TokensFile; path != "" {
		loaded := func() filewatch.Stamp {
			n.tokensMu.Lock()
			defer n.tokensMu.Unlock()
			return n.tokensStamp
		}
		n.goRun(func() {
			// Reloads a file replaced between New's load and this watch too.
			err := filewatch.RunReloading(ctx, filewatch.Config{Files: []string{path}, Logger: n.log}, loaded, func() { _ = n.ReloadTokens() })
			if err != nil {
				n.log.Warn("tokens file watch stopped", "err", err)
			}
		})
	}
	n.goRun(func() {
		if err := n.tls.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			n.log.Warn("TLS certificate watch stopped", "err", err)
		}
	})
}

// ReloadTLS re-reads the public TLS certificate files, as on SIGHUP. It
// does nothing without TLS.
func (n *Node) ReloadTLS() error { return n.tls.Reload() }

// securityMetrics count what the security layer refuses and reloads.
type securityMetrics struct {
	tlsReloads   *prometheus.CounterVec // result
	tokenReloads *prometheus.CounterVec // result
	authFailures *prometheus.CounterVec // reason
}

func newSecurityMetrics(reg prometheus.Registerer) *securityMetrics {
	m := &securityMetrics{
		tlsReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_tls_reloads_total", Help: "Reloads of the public TLS certificate files, by result (success, failure).",
		}, []string{"result"}),
		tokenReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_tokens_reloads_total", Help: "Reloads of the caller tokens file, by result (success, failure).",
		}, []string{"result"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_auth_failures_total", Help: "Requests refused by caller authentication or authorisation, by reason.",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.tlsReloads, m.tokenReloads, m.authFailures)
	for _, r := range []auth.Reason{auth.ReasonMissing, auth.ReasonUnknown, auth.ReasonScope, auth.ReasonLimit, auth.ReasonKeyPrefix} {
		m.authFailures.WithLabelValues(string(r)) // present at 0, so rates work from the start
	}
	return m
}

// ReloadTokens re-reads the tokens file, as on SIGHUP and when it changes.
// A file that does not parse is logged, counted and returned, and the last
// valid one stays in force. Without a tokens file it does nothing.
func (n *Node) ReloadTokens() error {
	path := n.cfg.Security.TokensFile
	if path == "" {
		return nil
	}
	if err := n.loadTokens(); err != nil {
		n.sm.tokenReloads.WithLabelValues("failure").Inc()
		n.log.Error("tokens file rejected; the last valid one stays in force", "file", path, "err", err)
		return err
	}
	n.sm.tokenReloads.WithLabelValues("success").Inc()
	n.log.Info("tokens file reloaded", "file", path, "tokens", len(n.tokens.Load().Tokens()))
	return nil
}

// loadTokens reads the tokens file and puts it in force, stamping it
// first (so a file replaced while it is read reads as changed); on error
// nothing changes.
func (n *Node) loadTokens() error {
	path := n.cfg.Security.TokensFile
	n.tokensMu.Lock()
	defer n.tokensMu.Unlock()
	stamp := filewatch.StampOf(path)
	p, err := auth.Load(path)
	if err != nil {
		return err
	}
	n.tokens.Store(p)
	n.tokensStamp = stamp
	return nil
}

// TokenPolicy returns the caller policy in force, nil when the API is
// open. Another endpoint (RESP AUTH) authenticates with it.
func (n *Node) TokenPolicy() *auth.Policy { return n.tokens.Load() }

// authConfig is the caller authentication of the public API.
func (n *Node) authConfig() authz.Config {
	return authz.Config{
		Policy:         n.tokens.Load,
		ProtectMetrics: n.cfg.Security.ProtectMetrics,
		OnFailure:      func(r auth.Reason) { n.sm.authFailures.WithLabelValues(string(r)).Inc() },
	}
}

// respConfig is the Redis-protocol endpoint's configuration with the
// node's security applied: the public certificate when TLS is on, and,
// with a tokens file, AUTH against it: a connection must authenticate with
// a token (AUTH token, or HELLO 3 AUTH default token) before any other
// command, and every check it sends is authorized with that token as on
// the other APIs, as the tokens file in force defines it at that command
// (authz.Config.Authorize looks it up again), so a reload reaches open
// connections.
func (n *Node) respConfig() resp.Config {
	rc := n.cfg.RESP
	rc.TLS = n.tls.ServerConfig()
	if n.cfg.Security.TokensFile != "" {
		ac := n.authConfig()
		rc.Authenticate = func(_ context.Context, _, password string) (any, error) {
			t, err := ac.Credential(password)
			if err != nil {
				return nil, err
			}
			return t, nil
		}
		rc.Context = func(ctx context.Context, p any) context.Context {
			t, _ := p.(*auth.Token)
			return authz.WithCaller(ctx, t)
		}
	}
	return rc
}
