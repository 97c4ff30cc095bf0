package resp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// selfSigned returns a certificate for 127.0.0.1 and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weir-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestTLS: with Config.TLS every connection speaks TLS: go-redis with the
// CA is answered, a plain-text client is not.
func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	cfg := DefaultConfig()
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s := New(fakeDecider{}, cfg, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		s.Close()
		<-done
	}()
	ctx := context.Background()
	secure := redis.NewClient(&redis.Options{
		Addr: ln.Addr().String(), MaxRetries: -1, DialTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	})
	defer secure.Close()
	if got, err := secure.Do(ctx, "WEIR.TAKE", "export", "k").Int64Slice(); err != nil || len(got) != 4 || got[1] != 9 {
		t.Fatalf("WEIR.TAKE over TLS = %v, %v", got, err)
	}
	plain := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plain-text client was answered by a TLS server")
	}
}
