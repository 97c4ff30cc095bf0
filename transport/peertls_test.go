package transport

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weir-rl/weir/api"
	"github.com/weir-rl/weir/bucket"
)

func TestDerivedCertificateIsDeterministic(t *testing.T) {
	a, err := DerivePeerCertificate([]byte("s1"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := DerivePeerCertificate([]byte("s1"))
	c, _ := DerivePeerCertificate([]byte("s2"))
	if !bytes.Equal(a.Certificate[0], b.Certificate[0]) {
		t.Fatal("the same secret derived two different certificates")
	}
	if bytes.Equal(a.Certificate[0], c.Certificate[0]) {
		t.Fatal("two secrets derived the same certificate")
	}
	leaf, err := x509.ParseCertificate(a.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature); err != nil {
		t.Fatalf("derived certificate is not self-signed: %v", err)
	}
	if !leaf.PublicKey.(ed25519.PublicKey).Equal(a.PrivateKey.(ed25519.PrivateKey).Public()) {
		t.Fatal("certificate and key do not match")
	}
}

// recordingProxy forwards TCP connections to target and records every
// byte that crosses it, in both directions.
type recordingProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func startProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.pipe(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *recordingProxy) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, io.TeeReader(src, p))
		_ = dst.Close()
		done <- struct{}{}
	}
	go cp(s, c)
	go cp(c, s)
	<-done
	<-done
}

func (p *recordingProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

func (p *recordingProxy) bytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.buf.Bytes())
}

// TestCapturedPeerTrafficHasNoPlaintext puts a recording TCP proxy between
// a pool and a server and sends a forward, a handoff and a replica batch
// on the replica link naming a limit and a key. With credentials derived from the secret the capture holds
// neither name; without credentials (the control) it holds both, so the
// check would see them.
func TestCapturedPeerTrafficHasNoPlaintext(t *testing.T) {
	const limit, key = "limit-name-4c1d", "tenant:captured-key-9e2f"
	send := func(t *testing.T, creds *Credentials) []byte {
		addr := startServer(t, &recorder{}, creds)
		proxy := startProxy(t, addr)
		cfg := LocalConfig()
		cfg.Credentials = creds
		p := NewPool(cfg)
		req := Request{Op: OpTake, Checks: []api.Check{{Limit: limit, Key: key, Cost: 1}}}
		if _, err := p.Do(context.Background(), proxy.ln.Addr().String(), req); err != nil {
			t.Fatal(err)
		}
		if err := p.Handoff(context.Background(), proxy.ln.Addr().String(), State{Buckets: []bucket.Entry{{Name: limit, Key: key}}}); err != nil {
			t.Fatal(err)
		}
		// A replica batch on the replica link (protocol 3), its key in
		// debt so that it is sent at all.
		p.SetProtocol(V3)
		batch := State{Buckets: []bucket.Entry{{Name: limit, Key: key + "-replica", Snapshot: bucket.Snapshot{Count: 1, UntilFull: time.Second}}}}
		if _, err := p.Replicate(context.Background(), proxy.ln.Addr().String(), batch, nil); err != nil {
			t.Fatal(err)
		}
		_ = p.Close()
		return proxy.bytes()
	}
	t.Run("plaintext control", func(t *testing.T) {
		got := send(t, nil)
		if !bytes.Contains(got, []byte(limit)) || !bytes.Contains(got, []byte(key)) || !bytes.Contains(got, []byte(key+"-replica")) {
			t.Fatalf("control capture of %d bytes lacks the names: the check below could not see them", len(got))
		}
	})
	t.Run("derived TLS", func(t *testing.T) {
		got := send(t, testCreds(t, "capture secret"))
		if len(got) < 500 {
			t.Fatalf("captured only %d bytes", len(got))
		}
		for _, s := range []string{limit, key, "weir.peer", "Batch", "Handoff"} {
			if bytes.Contains(got, []byte(s)) {
				t.Errorf("captured peer traffic contains %q in clear", s)
			}
		}
	})
}

// writeCA writes a CA and two peer certificates it signed, plus a stranger
// signed by another CA, and returns the directory.
func writeCA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	newCA := func(name string) (*x509.Certificate, ed25519.PrivateKey) {
		_, k, _ := ed25519.GenerateKey(rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c, k
	}
	write := func(name string, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	leaf := func(name string, ca *x509.Certificate, caKey ed25519.PrivateKey) {
		_, k, _ := ed25519.GenerateKey(rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, k.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		pk, _ := x509.MarshalPKCS8PrivateKey(k)
		write(name+".crt", "CERTIFICATE", der)
		write(name+".key", "PRIVATE KEY", pk)
	}
	ca, caKey := newCA("weir test peer CA")
	write("ca.crt", "CERTIFICATE", ca.Raw)
	leaf("a", ca, caKey)
	leaf("b", ca, caKey)
	other, otherKey := newCA("someone else")
	leaf("stranger", other, otherKey)
	return dir
}

func TestFileCredentials(t *testing.T) {
	dir := writeCA(t)
	load := func(name string) *Credentials {
		c, err := FileCredentials(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), filepath.Join(dir, "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	rec := &recorder{}
	addr := startServer(t, rec, load("a"))
	cfg := LocalConfig()
	cfg.Credentials = load("b")
	if _, err := newTestPool(t, cfg).Do(context.Background(), addr, take(0)); err != nil {
		t.Fatalf("peer signed by the CA: %v", err)
	}
	cfg.Credentials = load("stranger")
	if _, err := newTestPool(t, cfg).Do(context.Background(), addr, take(0)); err == nil {
		t.Fatal("a peer signed by another CA was served")
	}
	if n := rec.calls.Load(); n != 1 {
		t.Fatalf("handler calls = %d, want 1", n)
	}
	if _, err := FileCredentials(filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key"), filepath.Join(dir, "a.key")); err == nil {
		t.Fatal("a CA file without certificates was accepted")
	}
}

// TestPeerTLSIsVersion13: a TLS 1.2 client is refused by the peer server.
func TestPeerTLSIsVersion13(t *testing.T) {
	creds := testCreds(t, "s")
	addr := startServer(t, &recorder{}, creds)
	cc := creds.ClientConfig()
	cc.MaxVersion = tls.VersionTLS12
	cc.MinVersion = tls.VersionTLS12
	conn, err := tls.Dial("tcp", addr, cc)
	if err == nil {
		err = conn.Handshake()
		_ = conn.Close()
	}
	if err == nil {
		t.Fatal("TLS 1.2 handshake with the peer server succeeded")
	}
}
