package transport

import (
	"bytes"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"
)

// Credentials secure the peer channel: TLS 1.3, and both ends present a
// certificate the other verifies before a byte of the peer service moves,
// so a party without them can neither read nor inject peer traffic. A nil
// *Credentials means plaintext without authentication (a node without a
// cluster secret). Build them with SecretCredentials or FileCredentials. A
// Credentials is immutable and safe for concurrent use.
type Credentials struct {
	getCert func() (*tls.Certificate, error)
	verify  func(rawCerts [][]byte) error
	kind    string
}

// derivedCertSubject names the certificate SecretCredentials derives. It
// carries no host name: peers are pinned by the certificate itself, never
// by name.
const derivedCertSubject = "weir peer (derived from the cluster secret)"

// SecretCredentials derives the peer credentials from the cluster secret
// alone: the Ed25519 key whose seed is the peer key of DeriveKeys, and a
// self-signed certificate made from it deterministically (fixed serial,
// subject and validity; Ed25519 signatures are deterministic), so every
// node holding the secret derives the same certificate byte for byte. Each
// end presents it and accepts only a peer presenting exactly it. The TLS
// 1.3 handshake's CertificateVerify proves the peer holds the private key,
// which only the secret yields.
func SecretCredentials(secret []byte) (*Credentials, error) {
	cert, err := DerivePeerCertificate(secret)
	if err != nil {
		return nil, err
	}
	want := cert.Certificate[0]
	return &Credentials{
		getCert: func() (*tls.Certificate, error) { return &cert, nil },
		verify: func(raw [][]byte) error {
			if len(raw) != 1 || !bytes.Equal(raw[0], want) {
				return errors.New("transport: peer certificate is not the one derived from the cluster secret")
			}
			return nil
		},
		kind: "derived from the cluster secret",
	}, nil
}

// DerivePeerCertificate returns the certificate and Ed25519 key that
// SecretCredentials derives from secret. Equal secrets give equal
// certificates.
func DerivePeerCertificate(secret []byte) (tls.Certificate, error) {
	_, seed := DeriveKeys(secret)
	priv := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: derivedCertSubject},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		SubjectKeyId:          []byte("weir-peer"),
	}
	der, err := x509.CreateCertificate(zeroReader{}, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("transport: derive peer certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, nil
}

// zeroReader is the randomness given to x509.CreateCertificate: Ed25519
// signing uses none, and a fixed serial and key id leave nothing else to
// draw, so the certificate is deterministic whatever the reader returns.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// FileCredentials are operator-supplied peer credentials: each end
// presents the certificate and key in certFile and keyFile and accepts a
// peer whose certificate chains to a CA in caFile (PEM). Host names are
// not checked (peers dial each other by address); any certificate the CA
// signed is a peer. The files are read once, here.
func FileCredentials(certFile, keyFile, caFile string) (*Credentials, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("transport: peer certificate: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("transport: peer CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("transport: peer CA %s holds no PEM certificate", caFile)
	}
	return &Credentials{
		getCert: func() (*tls.Certificate, error) { return &cert, nil },
		verify:  func(raw [][]byte) error { return verifyChain(raw, pool) },
		kind:    "operator certificates",
	}, nil
}

// verifyChain checks that raw[0] chains to roots through raw[1:].
func verifyChain(raw [][]byte, roots *x509.CertPool) error {
	if len(raw) == 0 {
		return errors.New("transport: peer sent no certificate")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, r := range raw {
		c, err := x509.ParseCertificate(r)
		if err != nil {
			return fmt.Errorf("transport: peer certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("transport: peer certificate: %w", err)
	}
	return nil
}

// String names the kind of credentials, for logs.
func (c *Credentials) String() string {
	if c == nil {
		return "none (plaintext)"
	}
	return c.kind
}

// ServerConfig returns the TLS configuration of the peer service: TLS 1.3
// only, a client certificate required and verified.
func (c *Credentials) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:            tls.VersionTLS13,
		ClientAuth:            tls.RequireAnyClientCert, // verified by VerifyPeerCertificate
		GetCertificate:        func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.getCert() },
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error { return c.verify(raw) },
	}
}

// ClientConfig returns the TLS configuration for dialing peers: TLS 1.3
// only, this node's certificate presented, the server's verified by the
// same rule. InsecureSkipVerify turns off only the standard web PKI
// checks (chain to the system roots, host name), which VerifyPeerCertificate
// replaces; it is never left without a verifier.
func (c *Credentials) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:            tls.VersionTLS13,
		InsecureSkipVerify:    true, //nolint:gosec // verified by VerifyPeerCertificate
		GetClientCertificate:  func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c.getCert() },
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error { return c.verify(raw) },
	}
}
