// Package tlsreload serves a TLS certificate that is replaced when its
// files change on disk, without a restart, and optionally verifies client
// certificates against a CA file that reloads the same way. It is the TLS
// of Weir's public listeners (HTTP, gRPC, and any other endpoint that wraps
// a net.Listener with tls.NewListener and ServerConfig).
//
// A reload that fails (a certificate written before its key, a bad file)
// keeps the last good certificate in force and is retried on the next
// change, so a half-finished update never takes the listener down.
package tlsreload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/weir-rl/weir/internal/filewatch"
)

// MinVersion is the lowest TLS version served and dialed: TLS 1.2.
const MinVersion = tls.VersionTLS12

// Config names the files. The zero Config is disabled (plaintext).
type Config struct {
	// CertFile and KeyFile hold the server certificate chain and its key
	// (PEM). Both or neither.
	CertFile, KeyFile string
	// ClientCAFile, when set, requires every client to present a
	// certificate that chains to a CA in it (PEM). Needs CertFile.
	ClientCAFile string
}

// Enabled reports whether c turns TLS on.
func (c Config) Enabled() bool { return c.CertFile != "" }

// Validate reports an incomplete Config. It changes nothing and reads no
// file.
func (c Config) Validate() error {
	switch {
	case (c.CertFile == "") != (c.KeyFile == ""):
		return errors.New("tlsreload: a certificate file needs a key file and the other way round")
	case c.ClientCAFile != "" && c.CertFile == "":
		return errors.New("tlsreload: a client CA file needs a server certificate and key")
	}
	return nil
}

// Reloader holds the certificate (and client CAs) in force. Its methods
// are safe for concurrent use; the handshake path reads an atomic pointer
// and never locks.
type Reloader struct {
	cfg      Config
	logger   *slog.Logger
	onReload func(error)

	cert atomic.Pointer[tls.Certificate]
	cas  atomic.Pointer[x509.CertPool] // nil: no client certificates asked for

	mu     sync.Mutex      // serializes reloads, guards loaded
	loaded filewatch.Stamp // the files as they were just before the last good load
}

// New loads cfg's files and returns a Reloader serving them. It fails when
// cfg is incomplete or a file does not load. onReload, which may be nil,
// is called after every reload attempt after the first (nil: success);
// logger may be nil. New starts no goroutine; Run watches the files.
func New(cfg Config, logger *slog.Logger, onReload func(error)) (*Reloader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, errors.New("tlsreload: no certificate file")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if onReload == nil {
		onReload = func(error) {}
	}
	r := &Reloader{cfg: cfg, logger: logger, onReload: onReload}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// paths are the files r reads.
func (r *Reloader) paths() []string {
	paths := []string{r.cfg.CertFile, r.cfg.KeyFile}
	if r.cfg.ClientCAFile != "" {
		paths = append(paths, r.cfg.ClientCAFile)
	}
	return paths
}

// load reads the files and swaps them in, or changes nothing on error.
// Their information is taken before they are read, so a file replaced
// while it is read reads as changed afterwards.
func (r *Reloader) load() error {
	before := filewatch.StampOf(r.paths()...)
	cert, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("tlsreload: %w", err)
	}
	var cas *x509.CertPool
	if r.cfg.ClientCAFile != "" {
		if cas, err = LoadCertPool(r.cfg.ClientCAFile); err != nil {
			return err
		}
	}
	r.cert.Store(&cert)
	if cas != nil {
		r.cas.Store(cas)
	}
	r.loaded = before
	return nil
}

// Reload reads the files now (as on SIGHUP). On failure the certificate in
// force stays, and the error is returned and logged.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.load()
	if err != nil {
		r.logger.Error("TLS certificate reload failed; the last good one stays in force", "cert", r.cfg.CertFile, "err", err)
	} else {
		r.logger.Info("TLS certificate loaded", "cert", r.cfg.CertFile)
	}
	r.onReload(err)
	return err
}

// Run reloads the files whenever they change on disk, until ctx ends (see
// filewatch.Run). It returns nil then, or an error when the watch cannot be
// set up. Run must not be called twice at once. As soon as the watch is
// up, it reloads once if a file changed since the last good load, so a
// certificate replaced between New and Run is not missed.
func (r *Reloader) Run(ctx context.Context) error {
	loaded := func() filewatch.Stamp {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.loaded
	}
	return filewatch.RunReloading(ctx, filewatch.Config{Files: r.paths(), Logger: r.logger}, loaded, func() { _ = r.Reload() })
}

// Certificate returns the certificate in force.
func (r *Reloader) Certificate() *tls.Certificate { return r.cert.Load() }

// ServerConfig returns a TLS configuration that serves the certificate in
// force at each handshake, accepts TLS 1.2 and later, and, with a client
// CA file, requires a client certificate that chains to the CAs in force
// (for client authentication). Each call returns a new *tls.Config; it
// stays tied to r.
func (r *Reloader) ServerConfig() *tls.Config {
	c := &tls.Config{
		MinVersion:     MinVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.cert.Load(), nil },
	}
	if r.cfg.ClientCAFile != "" {
		// The CAs reload, so the chain is checked here against the pool in
		// force rather than against a ClientCAs fixed at build time.
		c.ClientAuth = tls.RequireAnyClientCert
		c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyClient(raw, r.cas.Load())
		}
	}
	return c
}

// verifyClient checks that raw[0] chains to roots through raw[1:] for
// client authentication.
func verifyClient(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("tlsreload: no client certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return fmt.Errorf("tlsreload: client certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("tlsreload: client certificate: %w", err)
	}
	return nil
}

// LoadCertPool reads the PEM certificates in path into a pool. A file with
// none is an error.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tlsreload: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tlsreload: %s holds no PEM certificate", path)
	}
	return pool, nil
}

// ClientOptions configure ClientConfig.
type ClientOptions struct {
	// CAFile verifies the server against these CAs (PEM) instead of the
	// system roots. Empty: the system roots.
	CAFile string
	// CertFile and KeyFile, when set, are presented as the client
	// certificate (for servers with a client CA file).
	CertFile, KeyFile string
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool
	// ServerName overrides the name checked in the server's certificate.
	ServerName string
}

// ClientConfig returns the TLS configuration the CLI and clients dial
// with: TLS 1.2 or later, the server verified against opts.CAFile.
func ClientConfig(opts ClientOptions) (*tls.Config, error) {
	c := &tls.Config{MinVersion: MinVersion, ServerName: opts.ServerName, InsecureSkipVerify: opts.InsecureSkipVerify} //nolint:gosec // tests only, by flag
	if opts.CAFile != "" {
		pool, err := LoadCertPool(opts.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if opts.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tlsreload: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
