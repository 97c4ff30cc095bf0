package tlsreload

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/internal/testpki"
)

// serve accepts TLS connections on loopback with r until the test ends and
// completes each handshake.
func serve(t *testing.T, r *Reloader) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln := tls.NewListener(ln, r.ServerConfig())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := tln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// served returns the leaf certificate the server at addr presents to a
// client trusting roots, or the handshake error.
func served(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

func clientCfg(t *testing.T, opts ClientOptions) *tls.Config {
	t.Helper()
	c, err := ClientConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWrongCAFailsHandshake(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "right")
	other := testpki.NewCA(t, dir, "other")
	srv := ca.Server(t, dir, "srv")
	r, err := New(Config{CertFile: srv.CertFile, KeyFile: srv.KeyFile}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)
	if _, err := served(addr, clientCfg(t, ClientOptions{CAFile: ca.CertFile})); err != nil {
		t.Fatalf("right CA: %v", err)
	}
	if _, err := served(addr, clientCfg(t, ClientOptions{CAFile: other.CertFile})); err == nil {
		t.Fatal("a client trusting another CA completed the handshake")
	}
	if _, err := served(addr, clientCfg(t, ClientOptions{})); err == nil {
		t.Fatal("a client trusting only the system roots completed the handshake")
	}
	// TLS 1.1 is refused.
	old := clientCfg(t, ClientOptions{CAFile: ca.CertFile})
	old.MinVersion, old.MaxVersion = tls.VersionTLS11, tls.VersionTLS11
	if _, err := served(addr, old); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
}

func TestClientCertificateRequired(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "srv")
	clientCA := testpki.NewCA(t, dir, "clients")
	other := testpki.NewCA(t, dir, "strangers")
	srv := ca.Server(t, dir, "srv")
	good := clientCA.Client(t, dir, "good")
	bad := other.Client(t, dir, "bad")
	r, err := New(Config{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: clientCA.CertFile}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)
	// TLS 1.3 reports a refused client certificate on the first read, so
	// each attempt reads after the handshake.
	try := func(p *testpki.Pair) error {
		opts := ClientOptions{CAFile: ca.CertFile}
		if p != nil {
			opts.CertFile, opts.KeyFile = p.CertFile, p.KeyFile
		}
		c, err := tls.Dial("tcp", addr, clientCfg(t, opts))
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if err != nil && err.Error() == "EOF" {
			return nil // the server completed the handshake and closed
		}
		return err
	}
	if err := try(&good); err != nil {
		t.Fatalf("client signed by the client CA: %v", err)
	}
	if err := try(&bad); err == nil {
		t.Fatal("client signed by another CA accepted")
	}
	if err := try(nil); err == nil {
		t.Fatal("client without a certificate accepted")
	}
}

// TestSwappedCertificateIsServedWithoutRestart replaces the files on disk
// while Run watches them: the next handshake presents the new certificate.
// A half-written update (a key that does not match) keeps the old one.
func TestSwappedCertificateIsServedWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	live := ca.Server(t, dir, "live")
	next := ca.Server(t, dir, "next")
	r, reloads := newCounted(t, live)
	runWatch(t, r)
	addr := serve(t, r)
	cc := clientCfg(t, ClientOptions{CAFile: ca.CertFile})
	first, err := served(addr, cc)
	if err != nil || first.Subject.CommonName != "live" {
		t.Fatalf("before the swap: %v, %v", first, err)
	}
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := served(addr, cc)
			if err == nil && c.Subject.CommonName == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the certificate %q was not served within 10s (last: %v, %v)", want, c, err)
			}
			select {
			case <-reloads:
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	next.Install(t, live)
	waitFor("next")

	// A key that does not match the certificate: rejected, "next" stays.
	third := ca.Server(t, dir, "third")
	testpki.Pair{CertFile: third.CertFile, KeyFile: next.KeyFile}.Install(t, testpki.Pair{CertFile: live.CertFile, KeyFile: t.TempDir() + "/unused"})
	select {
	case err := <-reloads:
		for err == nil { // drain successes of earlier events
			select {
			case err = <-reloads:
			case <-time.After(10 * time.Second):
				t.Fatal("no failed reload reported for a mismatched key")
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after the mismatched certificate was written")
	}
	if c, err := served(addr, cc); err != nil || c.Subject.CommonName != "next" {
		t.Fatalf("after a bad update: %v, %v; want the last good certificate", c, err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{CertFile: "a"}, {KeyFile: "b"}, {ClientCAFile: "c"}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if (Config{}).Validate() != nil || (Config{CertFile: "a", KeyFile: "b", ClientCAFile: "c"}).Validate() != nil {
		t.Fatal("valid config refused")
	}
	if _, err := New(Config{CertFile: "/nonexistent", KeyFile: "/nonexistent"}, nil, nil); err == nil {
		t.Fatal("missing files accepted")
	}
}

// TestCertificateReplacedBeforeRunIsServed: a certificate replaced after
// New loaded the files but before Run's watch was up is served once Run
// starts, and the one reload says so. Files just loaded read as
// unchanged, so starting Run without a change reloads nothing.
func TestCertificateReplacedBeforeRunIsServed(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "ca")
	live := ca.Server(t, dir, "live")
	r, reloads := newCounted(t, live)
	r.mu.Lock()
	unchanged := !r.loaded.Changed(r.paths()...)
	r.mu.Unlock()
	if !unchanged {
		t.Fatal("the files just loaded read as changed")
	}
	ca.Server(t, dir, "next").Install(t, live)
	runWatch(t, r)
	select {
	case err := <-reloads:
		if err != nil {
			t.Fatalf("the reload at Run's start failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not reload a certificate replaced before it started")
	}
	leaf, err := x509.ParseCertificate(r.Certificate().Certificate[0])
	if err != nil || leaf.Subject.CommonName != "next" {
		t.Fatalf("served after Run started: %v, %v; want next", leaf.Subject.CommonName, err)
	}
}

// newCounted returns a Reloader of cert's files whose reload results go to
// the returned channel.
func newCounted(t *testing.T, cert testpki.Pair) (*Reloader, chan error) {
	t.Helper()
	reloads := make(chan error, 16)
	r, err := New(Config{CertFile: cert.CertFile, KeyFile: cert.KeyFile}, nil, func(err error) { reloads <- err })
	if err != nil {
		t.Fatal(err)
	}
	return r, reloads
}

// runWatch runs r.Run until the test ends.
func runWatch(t *testing.T, r *Reloader) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}
