// Package testpki makes throwaway certificate authorities and certificates
// for tests: a CA, server certificates for loopback names, and client
// certificates, written as PEM files. Keys are ECDSA P-256, made fresh each
// time; nothing here is fit for production.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a test certificate authority.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate as a PEM file.
	CertFile string
}

// Pair names a certificate and key written as PEM files.
type Pair struct {
	CertFile, KeyFile string
}

// NewCA makes a CA valid for a day and writes its certificate to dir.
func NewCA(tb testing.TB, dir, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, CertFile: filepath.Join(dir, name+"-ca.pem")}
	writePEM(tb, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost with
// the given common name, written to dir as name.pem and name-key.pem.
func (ca *CA) Server(tb testing.TB, dir, name string) Pair {
	tb.Helper()
	return ca.issue(tb, dir, name, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate, written like Server's.
func (ca *CA) Client(tb testing.TB, dir, name string) Pair {
	tb.Helper()
	return ca.issue(tb, dir, name, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(tb testing.TB, dir, name string, usage x509.ExtKeyUsage) Pair {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem")}
	writePEM(tb, p.CertFile, "CERTIFICATE", der)
	writePEM(tb, p.KeyFile, "PRIVATE KEY", pk)
	return p
}

// Install copies the pair's files over dst's by writing temporary files and
// renaming them into place (the way certificate tools replace them), key
// first.
func (p Pair) Install(tb testing.TB, dst Pair) {
	tb.Helper()
	for _, f := range [][2]string{{p.KeyFile, dst.KeyFile}, {p.CertFile, dst.CertFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			tb.Fatal(err)
		}
		tmp := f[1] + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			tb.Fatal(err)
		}
		if err := os.Rename(tmp, f[1]); err != nil {
			tb.Fatal(err)
		}
	}
}

func serial(tb testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
